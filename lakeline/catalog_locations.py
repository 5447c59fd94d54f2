"""Where the catalog points a table's partitions: what the one delete function asks before it deletes a
run prefix (``lakeline.storage.ObjectStore.delete_prefix``).

A run prefix the catalog points at is a published version whatever a run or the pipeline state believes
(a state item lost or restored from an old copy, a run token used twice): the catalog is what readers
read. ``s3://`` tables are catalogued in the Glue Data Catalog; ``file://`` tables in the metastore of
the process's Spark engine, which the embedded runtime registers here when it starts
(``set_local_catalog``) because the functions it runs in-process build their own clients.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from lakeline.errors import LakelineError

if TYPE_CHECKING:
    from mypy_boto3_glue import GlueClient

    from lakeline.engines.base import Engine


class CatalogUnreadable(LakelineError):
    """The catalog could not say where a partition is (not: the partition does not exist)."""


class CatalogLocations(Protocol):
    def catalog_location(self, database: str, table: str, partition: Mapping[str, str]) -> str | None:
        """Where the catalog points the table's ``partition`` (the table itself when ``partition`` is
        empty), or ``None`` if the table or the partition is not in the catalog. ``CatalogUnreadable``
        when it cannot tell."""
        ...


class GlueLocations:
    """The Glue Data Catalog, Athena's (``glue:GetTable``, ``glue:GetPartition``)."""

    def __init__(self, glue: GlueClient) -> None:
        self._glue = glue

    def catalog_location(self, database: str, table: str, partition: Mapping[str, str]) -> str | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            found = self._glue.get_table(DatabaseName=database, Name=table)["Table"]
            if not partition:
                return found.get("StorageDescriptor", {}).get("Location")
            keys = [column["Name"] for column in found.get("PartitionKeys", [])]
            if sorted(key.lower() for key in keys) != sorted(key.lower() for key in partition):
                return None  # not a partition of this table: no catalog entry can point at it
            values = {key.lower(): value for key, value in partition.items()}
            descriptor = self._glue.get_partition(
                DatabaseName=database, TableName=table, PartitionValues=[values[key.lower()] for key in keys]
            )["Partition"].get("StorageDescriptor", {})
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "EntityNotFoundException":
                return None
            raise CatalogUnreadable(f"cannot read {database}.{table} from the Glue catalog: {error}") from error
        except BotoCoreError as error:
            raise CatalogUnreadable(f"cannot read {database}.{table} from the Glue catalog: {error}") from error
        return descriptor.get("Location")


class CatalogTables(Protocol):
    def drop_table(self, database: str, table: str) -> None:
        """Drop ``database.table`` from the catalog if it is there (a missing one is no error)."""
        ...


class GlueTables:
    """Tables dropped from the Glue Data Catalog (``glue:DeleteTable``): a run's own temp tables, whose data
    is the run's or nothing (a symlink table's manifest), so only the entry goes."""

    def __init__(self, glue: GlueClient) -> None:
        self._glue = glue

    def drop_table(self, database: str, table: str) -> None:
        from botocore.exceptions import ClientError

        try:
            self._glue.delete_table(DatabaseName=database, Name=table)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "EntityNotFoundException":
                raise


class EngineTables:
    """Tables dropped through an engine's SQL: the embedded runtime's, whose catalog is its Spark metastore."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def drop_table(self, database: str, table: str) -> None:
        from lakeline.names import ddl_name

        self._engine.execute(f"DROP TABLE IF EXISTS {ddl_name(database, table)}", database=database)


_local_lock = threading.Lock()
_local: list[CatalogLocations] = []


def set_local_catalog(catalog: CatalogLocations | None) -> None:
    """From now on, ``catalog`` (the embedded runtime's Spark metastore; ``None``: none) is where this
    process's ``file://`` tables are catalogued."""
    with _local_lock:
        _local[:] = [catalog] if catalog is not None else []


def local_catalog() -> CatalogLocations | None:
    """The catalog of this process's ``file://`` tables, if its Spark engine registered one."""
    with _local_lock:
        return _local[0] if _local else None
