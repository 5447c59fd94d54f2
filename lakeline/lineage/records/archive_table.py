"""The archive's table: one definition for Glue (CDK), Athena DDL and the local Spark table.

Partition projection on ``dt`` (a date, ``yyyy-MM-dd``, from a start date up to NOW) lets Athena find
partitions without a crawler or ``MSCK REPAIR``. The seed's daily crawler is still available
(``crawler_input``) for those who want schema drift detection, but it is not needed.

Struct fields are lowercase in the Glue/Athena type (Hive lowercases them; the OpenX JSON SerDe
matches keys case-insensitively), and keep the archive's exact ``recordedAt`` for Spark, whose JSON
reader matches keys as written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakeline.lineage.records.archive import PARTITION_COLUMN, STAGING_FOLDER
from lakeline.names import check_identifier, ddl_name, string_literal
from lakeline.storage import local_root

if TYPE_CHECKING:
    from lakeline.engines.spark import SparkEngine

LINEAGE_DATABASE = "lineage"
DEFAULT_TABLE = "lineage_archive"
PROJECTION_START = "2020-01-01"

LINEAGE_FIELDS: tuple[tuple[str, str], ...] = (
    ("root_id", "string"),
    ("node_id", "string"),
    ("parent_id", "string"),
    ("action_taken", "string"),
    ("storage_location", "string"),
    ("recordedAt", "bigint"),
    ("ttl_expiry", "bigint"),
    ("run_id", "string"),
    ("job_name", "string"),
    ("dataset", "string"),
    # Added with partition versions (#43), last: the JSON SerDe and Spark's JSON reader match fields by name,
    # so lines archived before it read it as NULL.
    ("version", "string"),
)


def _lineage_type(*, lowercase: bool) -> str:
    fields = ",".join(f"{name.lower() if lowercase else name}:{kind}" for name, kind in LINEAGE_FIELDS)
    return f"array<struct<{fields}>>"


def archive_columns(*, lowercase: bool = True) -> list[tuple[str, str]]:
    return [
        ("record_id", "string"),
        ("root_id", "string"),
        ("status", "string"),
        ("lineage", _lineage_type(lowercase=lowercase)),
    ]


def _location(location: str, what: str = "archive") -> str:
    if not location.startswith(("s3://", "file:/")):
        raise ValueError(f"{what} location {location!r} must be s3://bucket/prefix/ or file:///folder/")
    return location.rstrip("/") + "/"


def projection_parameters(location: str, start: str = PROJECTION_START) -> dict[str, str]:
    return {
        "classification": "json",
        "projection.enabled": "true",
        f"projection.{PARTITION_COLUMN}.type": "date",
        f"projection.{PARTITION_COLUMN}.format": "yyyy-MM-dd",
        f"projection.{PARTITION_COLUMN}.range": f"{start},NOW",
        f"projection.{PARTITION_COLUMN}.interval": "1",
        f"projection.{PARTITION_COLUMN}.interval.unit": "DAYS",
        "storage.location.template": f"{_location(location)}{PARTITION_COLUMN}=${{{PARTITION_COLUMN}}}/",
    }


@dataclass(frozen=True)
class JsonTable:
    """A table of JSON lines under ``dt=YYYY-MM-DD/`` folders, in its three forms (Glue, Athena, Spark).

    ``columns(lowercase=...)`` gives (name, Hive type) pairs: lowercase struct fields for Glue and Athena,
    the keys as written for Spark's JSON reader.
    """

    what: str
    description: str
    columns: Callable[..., list[tuple[str, str]]]

    def glue_table_input(self, table: str, location: str, *, start: str = PROJECTION_START) -> dict[str, Any]:
        """``TableInput`` for Glue ``CreateTable`` (and the CDK ``CfnTable``)."""
        check_identifier(table, f"{self.what} table")
        folder = _location(location, self.what)
        return {
            "Name": table,
            "Description": self.description,
            "TableType": "EXTERNAL_TABLE",
            "Parameters": {"EXTERNAL": "TRUE", **projection_parameters(folder, start)},
            "PartitionKeys": [{"Name": PARTITION_COLUMN, "Type": "string"}],
            "StorageDescriptor": {
                "Columns": [{"Name": name, "Type": kind} for name, kind in self.columns()],
                "Location": folder,
                "InputFormat": "org.apache.hadoop.mapred.TextInputFormat",
                "OutputFormat": "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
                "SerdeInfo": {
                    "SerializationLibrary": "org.openx.data.jsonserde.JsonSerDe",
                    "Parameters": {"ignore.malformed.json": "false", "case.insensitive": "true"},
                },
            },
        }

    def athena_ddl(self, database: str, table: str, location: str, *, start: str = PROJECTION_START) -> str:
        """The same table as Athena DDL."""
        folder = _location(location, self.what)
        columns = ",\n".join(f"  `{name}` {kind}" for name, kind in self.columns())
        properties = ",\n".join(
            f"  {string_literal(key)}={string_literal(value)}"
            for key, value in projection_parameters(folder, start).items()
        )
        return (
            f"CREATE EXTERNAL TABLE IF NOT EXISTS {ddl_name(database, table)} (\n{columns}\n)\n"
            f"PARTITIONED BY (`{PARTITION_COLUMN}` string)\n"
            "ROW FORMAT SERDE 'org.openx.data.jsonserde.JsonSerDe'\n"
            f"LOCATION {string_literal(folder)}\n"
            f"TBLPROPERTIES (\n{properties}\n)\n"
        )

    def spark_ddl(self, database: str, table: str, location: str) -> str:
        """The local table over a folder (Spark SQL; partitions found by RECOVER PARTITIONS)."""
        columns = ", ".join(f"`{name}` {kind}" for name, kind in self.columns(lowercase=False))
        return (
            f"CREATE TABLE {ddl_name(database, table)} ({columns}, `{PARTITION_COLUMN}` string) "
            f"USING json PARTITIONED BY (`{PARTITION_COLUMN}`) "
            f"LOCATION {string_literal(_location(location, self.what))}"
        )

    def register_local(self, engine: SparkEngine, folder: Path, database: str, table: str) -> None:
        """(Re)create the Spark table over a local folder and pick up its ``dt=`` partitions."""
        folder.mkdir(parents=True, exist_ok=True)
        session = engine.session
        session.sql(f"CREATE DATABASE IF NOT EXISTS {ddl_name(database)}")
        # The table only points at the folder: dropping it keeps the files, recreating it follows a move.
        session.sql(f"DROP TABLE IF EXISTS {ddl_name(database, table)}")
        session.sql(self.spark_ddl(database, table, local_root(folder)))
        session.sql(f"ALTER TABLE {ddl_name(database, table)} RECOVER PARTITIONS")


ARCHIVE_TABLE = JsonTable(
    "archive", "Lakeline lineage archive: one JSON line per record, written by the nightly trace", archive_columns
)
glue_table_input = ARCHIVE_TABLE.glue_table_input
athena_ddl = ARCHIVE_TABLE.athena_ddl
spark_ddl = ARCHIVE_TABLE.spark_ddl


def crawler_input(
    name: str, role_arn: str, database: str, location: str, *, schedule: str = "cron(0 1 * * ? *)"
) -> dict[str, Any]:
    """Optional: the seed's crawler (daily at 01:00 UTC) for Glue ``CreateCrawler``."""
    return {
        "Name": name,
        "Role": role_arn,
        "DatabaseName": check_identifier(database, "archive database"),
        # The staged traces are not the table's: the compaction folds them into the day folders.
        "Targets": {"S3Targets": [{"Path": _location(location), "Exclusions": [f"{STAGING_FOLDER}/**"]}]},
        "Schedule": schedule,
        "SchemaChangePolicy": {"UpdateBehavior": "UPDATE_IN_DATABASE", "DeleteBehavior": "LOG"},
    }
