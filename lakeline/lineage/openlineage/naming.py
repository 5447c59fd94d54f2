"""Dataset identity in OpenLineage events, per the OpenLineage naming conventions.

A catalog table ``db.table`` is named as Athena names it (what Airflow's Athena operator emits):

    namespace  awsathena://athena.{region}.amazonaws.com
    name       AwsDataCatalog.{db}.{table}

and carries a ``symlinks`` facet when the Glue catalog is known (``glueCatalog`` /
``OPENLINEAGE_GLUE_CATALOG``, ``arn:aws:glue:{region}:{account}``): first the same dotted name (the
identifier OpenMetadata reads), then the Glue table's ARN form, namespace ``arn:aws:glue:{region}:{account}``
and name ``table/{db}/{table}`` (what the OpenLineage Spark listener on Glue and Amazon DataZone use).

The embedded local runtime keeps the same names under its own namespace, ``lakeline-local://spark``
(tables of its own metastore, not Athena's); configure ``datasetNamespace`` with the deployed
namespace (and ``glueCatalog``) to give a local run the dataset identity of the deployed one.

Tables read from a Glue catalog dump (``aws glue get-tables`` output: ``lakeline lineage sql/tree
--catalog``, ``lakeline glue lineage``) are Glue's tables, so every command names them alike
(``glue_dump_naming``): a namespace given or configured wins, else Athena's of the dump's region when it
is known, else the local one; their symlinks name the configured Glue catalog, else the dump's own
(its region and its tables' ``CatalogId``).
S3 locations are ``s3://{bucket}`` / ``{key}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from openlineage.client.facet_v2 import symlinks_dataset
from openlineage.client.naming.dataset import AWSGlue

from lakeline.errors import ConfigError

ATHENA_CATALOG = "AwsDataCatalog"
"""The catalog name Athena gives the account's Glue Data Catalog."""
LOCAL_DATASET_NAMESPACE = "lakeline-local://spark"
"""Tables of the embedded local runtime's own metastore."""
_GLUE_CATALOG = re.compile(r"arn:aws[a-z-]*:glue:([a-z0-9-]+):(\d{12})")


def athena_dataset_namespace(region: str) -> str:
    """Athena's dataset namespace in a region."""
    return f"awsathena://athena.{region}.amazonaws.com"


def check_glue_catalog(value: str) -> str:
    if not _GLUE_CATALOG.fullmatch(value):
        raise ConfigError(f"glue catalog {value!r} must be written arn:aws:glue:REGION:ACCOUNT (12 digits)")
    return value


def aws_partition(region: str) -> str:
    """The AWS partition of a region, the second field of its ARNs."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def glue_catalog_of(region: str | None, catalog_ids: frozenset[str]) -> str | None:
    """``arn:{partition}:glue:{region}:{account}`` of a dump's tables: known only with the region and one account."""
    if not region or len(catalog_ids) != 1:
        return None  # several accounts' tables: no one catalog to name
    (account,) = catalog_ids
    candidate = f"arn:{aws_partition(region)}:glue:{region}:{account}"
    return candidate if _GLUE_CATALOG.fullmatch(candidate) else None


@dataclass(frozen=True)
class DatasetNaming:
    """Names of one run's datasets: ``database.table`` inside Lakeline, the spec's names in events."""

    namespace: str
    glue_catalog: str | None = None
    """``arn:aws:glue:{region}:{account}``; when set, catalog tables get a ``symlinks`` facet."""

    def __post_init__(self) -> None:
        if self.glue_catalog is not None:
            check_glue_catalog(self.glue_catalog)

    def of(self, dataset: str) -> tuple[str, str]:
        """(namespace, name) of ``db.table``, or of a dataset named outside the catalog (``s3://bucket/key``,
        ``postgres://host:port/db.schema.table``, ``arn:aws:dynamodb:region:account:table/name``, ...)."""
        outside = outside_catalog(dataset)
        if outside is not None:
            return outside
        return self.namespace, self.name(dataset)

    def name(self, dataset: str) -> str:
        """``db.table`` as ``AwsDataCatalog.db.table`` (unchanged if it is already catalog-qualified)."""
        if dataset.count(".") >= 2 or outside_catalog(dataset) is not None:
            return dataset
        return f"{ATHENA_CATALOG}.{dataset}"

    def facets(self, dataset: str) -> dict[str, symlinks_dataset.SymlinksDatasetFacet]:
        """The ``symlinks`` facet of a catalog table, when the Glue catalog is known."""
        if self.glue_catalog is None or outside_catalog(dataset) is not None:
            return {}
        match = _GLUE_CATALOG.fullmatch(self.glue_catalog)
        assert match is not None  # checked in __post_init__
        database, table = table_of(dataset).split(".", 1)
        glue = AWSGlue(region_name=match.group(1), account_id=match.group(2), database_name=database, table_name=table)
        identifiers = [
            symlinks_dataset.Identifier(namespace=self.namespace, name=self.name(dataset), type="TABLE"),
            symlinks_dataset.Identifier(namespace=glue.get_namespace(), name=glue.get_name(), type="TABLE"),
        ]
        return {"symlinks": symlinks_dataset.SymlinksDatasetFacet(identifiers=identifiers)}


def outside_catalog(dataset: str) -> tuple[str, str] | None:
    """(namespace, name) of a dataset named outside the catalog: a URI's scheme and authority and its path
    (``s3://bucket`` + key, ``postgres://host:port`` + ``db.schema.table``), or an ARN's prefix and its
    resource (``arn:aws:dynamodb:region:account`` + ``table/name``); ``None`` for a catalog ``db.table``."""
    if dataset.startswith("arn:"):
        parts = dataset.split(":", 5)
        if len(parts) == 6:
            return ":".join(parts[:5]), parts[5]
        return dataset, ""
    if "://" in dataset:
        scheme, _, rest = dataset.partition("://")
        authority, _, name = rest.partition("/")
        return f"{scheme}://{authority}", name or "/"
    return None


def table_of(name: str) -> str:
    """``db.table`` from a dataset name, with or without the ``AwsDataCatalog.`` prefix."""
    prefix = f"{ATHENA_CATALOG}."
    return name[len(prefix) :] if name.startswith(prefix) else name


def glue_dump_naming(
    namespace: str,
    glue_catalog: str | None,
    *,
    region: str | None,
    catalog_ids: frozenset[str],
    namespace_given: bool = False,
) -> DatasetNaming:
    """The naming of a Glue catalog dump's tables; see the module docstring.

    ``namespace``/``glue_catalog``: the configured ones (``LOCAL_DATASET_NAMESPACE`` when nothing is);
    ``namespace_given``: the namespace was given on the command line, even the local one.
    """
    if not namespace_given and namespace == LOCAL_DATASET_NAMESPACE and region:
        namespace = athena_dataset_namespace(region)
    return DatasetNaming(namespace, glue_catalog or glue_catalog_of(region, catalog_ids))
