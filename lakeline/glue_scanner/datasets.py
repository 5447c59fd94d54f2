"""Names of the datasets a Glue job reads and writes outside the Glue catalog, per the OpenLineage spec.

A dataset is kept as one string while a script is analysed: ``database.table`` for a Glue catalog
table, otherwise ``namespace/name`` in the OpenLineage naming spec's terms, where the namespace is a
URI authority (``s3://bucket``, ``postgres://host:5432``, ``kafka://broker:9092``, ``kinesis://host``) or
an AWS ARN prefix (``arn:aws:dynamodb:region:account``). ``split_dataset`` gives the two parts back.

- JDBC: the Glue Connection's ``JDBC_CONNECTION_URL`` gives scheme, host, port and database;
  ``dbtable`` gives schema and table. ``postgres://h:5432`` + ``db.schema.table``, ``mysql://h:3306`` +
  ``db.table``, ``redshift://cluster.region:5439`` + ``db.schema.table``, ``mssql://h:1433`` +
  ``db.schema.table``, ``oracle://h:1521`` + ``service.schema.table``.
- DynamoDB: the table's ARN, ``arn:aws:dynamodb:{region}:{account}`` + ``table/{name}``.
- Kinesis: ``kinesis://{endpoint host}`` + the stream name (as OpenLineage's Spark integration names it).
- Kafka: ``kafka://{first bootstrap server}`` + the topic.
- Snowflake: ``snowflake://{account}`` (from ``sfUrl``) + ``db.schema.table``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from lakeline.lineage.openlineage.naming import outside_catalog

_JDBC = re.compile(r"jdbc:(?P<kind>[a-z0-9]+)(?::thin)?:(?://)?@?(?P<host>[^:/;?]+)(?::(?P<port>\d+))?(?P<rest>.*)")
_DEFAULT_PORTS = {"postgres": "5432", "mysql": "3306", "redshift": "5439", "mssql": "1433", "oracle": "1521"}
_SCHEMES = {"postgresql": "postgres", "mysql": "mysql", "mariadb": "mysql", "redshift": "redshift"}
_SCHEMES.update({"sqlserver": "mssql", "oracle": "oracle"})
_DEFAULT_SCHEMAS = {"postgres": "public", "redshift": "public", "mssql": "dbo"}
_TWO_PART = frozenset({"mysql"})
"""Kinds whose datasets are ``database.table``: MySQL has no schema level."""


class NamingError(ValueError):
    """What is missing to name a dataset; the message says it."""


def split_dataset(dataset: str) -> tuple[str, str] | None:
    """(namespace, name) of a dataset outside the catalog; ``None`` for a catalog ``database.table``."""
    return outside_catalog(dataset)


def is_catalog_table(dataset: str) -> bool:
    return split_dataset(dataset) is None


@dataclass(frozen=True)
class Jdbc:
    """A JDBC URL taken apart: the OpenLineage scheme, its namespace and the URL's database."""

    kind: str
    namespace: str
    database: str | None


def parse_jdbc_url(url: str) -> Jdbc:
    match = _JDBC.fullmatch(url.strip())
    if match is None:
        raise NamingError(f"JDBC URL {url!r} is not in a form that is understood")
    kind = _SCHEMES.get(match["kind"])
    if kind is None:
        raise NamingError(f"JDBC driver {match['kind']!r} has no OpenLineage naming")
    host, port, rest = match["host"].lower(), match["port"] or _DEFAULT_PORTS[kind], match["rest"]
    database = None
    if rest.startswith(("/", ":")):
        database = re.split(r"[?;]", rest[1:], maxsplit=1)[0] or None
    named = re.search(r";(?:databaseName|database)=([^;]+)", rest, re.IGNORECASE)
    if named:
        database = named.group(1)
    if kind == "redshift":
        # cluster.id.region.redshift.amazonaws.com -> cluster.region (workgroups alike)
        labels = host.split(".")
        host = f"{labels[0]}.{labels[2]}" if len(labels) > 3 and labels[3].startswith("redshift") else host
    return Jdbc(kind, f"{kind}://{host}:{port}", database)


def jdbc_dataset(url: str, table: str, database: str | None = None) -> str:
    """The dataset of ``table`` (``dbtable``: ``table``, ``schema.table`` or ``db.schema.table``)."""
    jdbc = parse_jdbc_url(url)
    parts = [part.strip('"`[]') for part in table.split(".") if part]
    depth = 2 if jdbc.kind in _TWO_PART else 3
    if depth == 3 and len(parts) == 1:
        default_schema = _DEFAULT_SCHEMAS.get(jdbc.kind)
        if default_schema is None:
            raise NamingError(f"{table!r} names no schema and {jdbc.kind} has no default one")
        parts = [default_schema, *parts]
    if len(parts) == depth - 1:
        chosen = database or jdbc.database
        if chosen is None:
            raise NamingError(f"neither the JDBC URL {url!r} nor the options name the database of {table!r}")
        parts = [chosen, *parts]
    return f"{jdbc.namespace}/{'.'.join(parts[-depth:])}"


def dynamodb_dataset(table: str, region: str | None, account: str | None) -> str:
    """``table`` may already be an ARN (``dynamodb.tableArn``, cross-account reads)."""
    if table.startswith("arn:aws:dynamodb:"):
        return table
    missing = [what for what, value in (("region", region), ("account", account)) if not value]
    if missing:
        raise NamingError(
            f"the {' and '.join(missing)} of DynamoDB table {table!r} is not known: "
            "connection.json gives Region and AccountId"
        )
    return f"arn:aws:dynamodb:{region}:{account}:table/{table}"


def kinesis_dataset(options: Mapping[str, str], region: str | None) -> str:
    arn = options.get("streamARN") or options.get("streamArn")
    if arn:
        # arn:aws:kinesis:{region}:{account}:stream/{name}
        parts = arn.split(":")
        if len(parts) == 6 and parts[5].startswith("stream/"):
            return f"kinesis://kinesis.{parts[3]}.amazonaws.com/{parts[5][len('stream/') :]}"
        raise NamingError(f"Kinesis stream ARN {arn!r} is not in the form arn:aws:kinesis:region:account:stream/name")
    name = options.get("streamName")
    if not name:
        raise NamingError("the Kinesis options name no stream (streamName or streamARN)")
    endpoint = options.get("endpointUrl")
    if endpoint:
        host = re.sub(r"^[a-z]+://", "", endpoint).split("/")[0]
        host = re.sub(r":(443|80)$", "", host)
    elif region:
        host = f"kinesis.{region}.amazonaws.com"
    else:
        raise NamingError(f"the region of Kinesis stream {name!r} is not known (no endpointUrl, no Region)")
    return f"kinesis://{host}/{name}"


def kafka_dataset(bootstrap_servers: str, topic: str) -> str:
    first = bootstrap_servers.split(",")[0].strip()
    first = re.sub(r"^[A-Za-z_]+://", "", first)
    if not first:
        raise NamingError("the Kafka bootstrap servers are not known")
    host, _, port = first.partition(":")
    return f"kafka://{host}:{port or '9092'}/{topic}"


def snowflake_dataset(url: str, database: str, schema: str, table: str) -> str:
    host = re.sub(r"^[a-z]+://", "", url.strip()).split("/")[0]
    account = host.removesuffix(".snowflakecomputing.com")
    return f"snowflake://{account}/{database}.{schema}.{table}"
