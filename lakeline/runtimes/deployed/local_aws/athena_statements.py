"""The local Athena's statements: which Glue tables one names, reads and changes, rewritten for Spark.

``Rewriter`` turns an Athena statement into the ``Statement`` the endpoint runs (``lakeline.runtimes.deployed.local_aws.
athena``): Glue database names become Spark's prefixed ones, ``s3://`` URIs the mirror's ``file:`` URIs, a CTAS
without a location writes under the query's output location, and a ``CREATE TABLE`` is the Glue ``TableInput``
Athena would make of it (Athena's DDL only writes the catalog).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from lakeline.engines.base import DEFAULT_DATABASE
from lakeline.engines.serdes import LAZY_SIMPLE
from lakeline.errors import LakelineError
from lakeline.names import ddl_name

TABLE_NAME = r"(?P<name>[`\"]?[A-Za-z0-9_]+[`\"]?(?:\.[`\"]?[A-Za-z0-9_]+[`\"]?)?)"
# Statements sqlglot only knows as opaque commands: the table they name is rewritten by hand.
COMMAND_TABLE = re.compile(r"^(?P<verb>MSCK\s+REPAIR\s+TABLE)\s+" + TABLE_NAME + r"\s*$", re.IGNORECASE)
S3_URI = re.compile(r"^s3a?://(?P<bucket>[^/]+)/?(?P<key>.*)$")

PARQUET = {
    "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    "OutputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
    "SerdeInfo": {
        "SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
        "Parameters": {"serialization.format": "1"},
    },
}
ORC = {
    "InputFormat": "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
    "OutputFormat": "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
    "SerdeInfo": {"SerializationLibrary": "org.apache.hadoop.hive.ql.io.orc.OrcSerde", "Parameters": {}},
}
TEXT_FORMATS = {
    "InputFormat": "org.apache.hadoop.mapred.TextInputFormat",
    "OutputFormat": "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
}


class LocalAthenaError(LakelineError):
    """A query the local endpoint cannot run as Athena would (its reason becomes the FAILED reason)."""


@dataclass
class Statement:
    """One Athena statement as the local endpoint runs it."""

    sql: str  # for Spark: prefixed databases, file: locations
    tables: set[tuple[str, str]]  # every (Glue database, table) it names
    changes: set[tuple[str, str]]  # the tables it may create, drop or alter
    databases: set[str]  # every Glue database it names
    creates_database: str | None = None
    drops_database: str | None = None
    locations: list[str] = field(default_factory=list)  # the s3:// URIs it names
    is_query: bool = False
    defines: dict[str, Any] | None = None  # CREATE TABLE without AS: the Glue TableInput Athena makes of it
    if_not_exists: bool = False
    # query, ctas, create, insert, drop, alter[_partition], add/drop_partition (``athena_caller.needed_for``)
    kind: str = "query"
    writes_to: str | None = None  # a CTAS's location (s3://)


def _ctas_location(tree: exp.Create) -> str | None:
    properties = tree.args.get("properties")
    for prop in properties.expressions if properties else []:
        if prop.name.lower() == "external_location" and isinstance(prop.args.get("value"), exp.Literal):
            return str(prop.args["value"].this)
    return None


def _kind(tree: exp.Expr) -> str:
    if isinstance(tree, exp.Create):
        if str(tree.args.get("kind") or "").upper() != "TABLE":
            return "alter"  # a view: its definition is a Glue table
        return "ctas" if isinstance(tree.expression, exp.Query) else "create"
    if isinstance(tree, exp.Alter):
        actions = tree.args.get("actions") or []
        if any(isinstance(action, exp.AddPartition) for action in actions):
            return "add_partition"
        if any(isinstance(action, exp.DropPartition) for action in actions):
            return "drop_partition"
        return "alter_partition" if tree.find(exp.Partition) else "alter"
    for kind, node in (("insert", exp.Insert), ("drop", exp.Drop), ("query", exp.Query)):
        if isinstance(tree, node):
            return kind
    return "alter"  # anything else changes the table's definition


STORED_AS: dict[str, dict[str, Any]] = {
    "PARQUET": PARQUET,
    "ORC": ORC,
    "TEXTFILE": {**TEXT_FORMATS, "SerdeInfo": {"SerializationLibrary": LAZY_SIMPLE, "Parameters": {}}},
}
# ROW FORMAT DELIMITED's clauses → LazySimpleSerDe's parameters, as Athena writes them into Glue.
DELIMITED = {
    "fields": ("field.delim", "serialization.format"),
    "escaped": ("escape.delim",),
    "collection_items": ("collection.delim",),
    "map_keys": ("mapkey.delim",),
    "lines": ("line.delim",),
    "null": ("serialization.null.format",),
}


def _literal(node: Any, what: str) -> str:
    if not isinstance(node, exp.Literal):
        raise LocalAthenaError(f"{what} must be a string literal, got {node.sql('athena') if node else None}")
    return str(node.this)


def _glue_columns(schema: Any) -> list[dict[str, str]]:
    return [
        {"Name": column.name.lower(), "Type": _glue_type(column.args["kind"].sql("hive"))}
        for column in (schema.expressions if isinstance(schema, exp.Schema) else [])
        if isinstance(column, exp.ColumnDef) and column.args.get("kind") is not None
    ]


def _defined_table(tree: exp.Create, name: str) -> dict[str, Any]:
    """The Glue ``TableInput`` Athena makes of ``CREATE [EXTERNAL] TABLE ... (columns) [PARTITIONED BY]
    [CLUSTERED BY] [ROW FORMAT ...] [STORED AS ...] [LOCATION] [TBLPROPERTIES]``: Athena's DDL only
    writes the catalog, so any SerDe is accepted here, as there, and read as ``athena_catalog.CatalogSync`` reads it."""
    stored: dict[str, Any] = STORED_AS["TEXTFILE"]
    serde: dict[str, Any] | None = None
    parameters: dict[str, str] = {}
    descriptor: dict[str, Any] = {"Columns": _glue_columns(tree.this), "Compressed": False}
    partition_keys: list[dict[str, str]] = []
    properties = tree.args.get("properties")
    for prop in properties.expressions if properties else []:
        if isinstance(prop, exp.ExternalProperty):
            parameters["EXTERNAL"] = "TRUE"
        elif isinstance(prop, exp.PartitionedByProperty):
            partition_keys = _glue_columns(prop.this)
        elif isinstance(prop, exp.RowFormatSerdeProperty):
            listed = prop.args.get("serde_properties")
            serde = {
                "SerializationLibrary": _literal(prop.this, "ROW FORMAT SERDE"),
                "Parameters": {
                    _literal(item.this, "a SerDe property"): _literal(item.args.get("value"), "a SerDe property")
                    for item in (listed.expressions if listed else [])
                },
            }
        elif isinstance(prop, exp.RowFormatDelimitedProperty):
            delimited: dict[str, str] = {}
            for clause, keys in DELIMITED.items():
                if prop.args.get(clause) is not None:
                    value = _literal(prop.args[clause], f"ROW FORMAT DELIMITED {clause}")
                    delimited.update(dict.fromkeys(keys, value))
            serde = {"SerializationLibrary": LAZY_SIMPLE, "Parameters": delimited}
        elif isinstance(prop, exp.FileFormatProperty) and isinstance(prop.this, exp.InputOutputFormat):
            stored = {
                "InputFormat": _literal(prop.this.args.get("input_format"), "INPUTFORMAT"),
                "OutputFormat": _literal(prop.this.args.get("output_format"), "OUTPUTFORMAT"),
                "SerdeInfo": STORED_AS["TEXTFILE"]["SerdeInfo"],
            }
        elif isinstance(prop, exp.FileFormatProperty):
            kind = prop.this.name.upper()
            if kind not in STORED_AS:
                raise LocalAthenaError(
                    f"table {name}: STORED AS {kind} is not supported by the local Athena endpoint "
                    f"(use one of {', '.join(sorted(STORED_AS))})"
                )
            stored = STORED_AS[kind]
        elif isinstance(prop, exp.LocationProperty):
            descriptor["Location"] = _literal(prop.this, "LOCATION")
        elif isinstance(prop, exp.ClusteredByProperty):
            descriptor["BucketColumns"] = [column.name.lower() for column in prop.expressions]
            descriptor["NumberOfBuckets"] = int(_literal(prop.args.get("buckets"), "INTO ... BUCKETS"))
        elif isinstance(prop, exp.SchemaCommentProperty):
            parameters["comment"] = _literal(prop.this, "COMMENT")
        elif isinstance(prop, exp.Property) and isinstance(prop.this, exp.Literal):
            parameters[prop.name] = _literal(prop.args.get("value"), f"TBLPROPERTIES {prop.name!r}")
        else:
            raise LocalAthenaError(f"table {name}: {prop.sql('athena')} is not supported by the local Athena endpoint")
    descriptor.update(json.loads(json.dumps(stored)))
    if serde is not None:
        descriptor["SerdeInfo"] = serde
    return {
        "Name": name.split(".")[-1],
        "TableType": "EXTERNAL_TABLE",
        "Parameters": parameters,
        "PartitionKeys": partition_keys,
        "StorageDescriptor": descriptor,
    }


def _glue_type(hive: str) -> str:
    """A type as Glue spells it (``decimal(24,2)``, ``struct<x:int>``), from sqlglot's Hive SQL of it."""
    return re.sub(r"\s*([,:<>()])\s*", r"\1", hive.replace("`", "")).lower()


def unquoted(name: str) -> str:
    return name.strip("`\"'").lower()


class Rewriter:
    """Glue names ↔ Spark names, and s3:// ↔ the mirror's file: URIs."""

    def __init__(self, mirror: Path, prefix: str) -> None:
        self.mirror = mirror.resolve()
        self.prefix = prefix
        root = re.escape(self.mirror.as_posix())
        self._local = re.compile(rf"file:(?://)?{root}/")

    def spark_database(self, database: str) -> str:
        return f"{self.prefix}{database}"

    def local_uri(self, uri: str) -> str:
        """``s3://bucket/key`` as the file: URI Spark reads and names files with (``file:///...``)."""
        found = S3_URI.match(uri)
        if found is None:
            return uri
        return f"file://{self.mirror.as_posix()}/{found.group('bucket')}/{found.group('key')}"

    def s3_text(self, text: str) -> str:
        """``text`` with the mirror's URIs as s3:// and Spark database names as Glue's."""
        return self._local.sub("s3://", text).replace(self.prefix, "")

    def statement(self, sql: str, context_database: str | None, *, ctas_root: str = "") -> Statement:
        """``sql`` rewritten for Spark; ``ctas_root``: where a CTAS without a location writes (s3://)."""
        text = sql.strip().rstrip(";").strip()
        default = (context_database or DEFAULT_DATABASE).lower()
        command = COMMAND_TABLE.match(text)
        if command is not None:
            parts = [unquoted(part) for part in command.group("name").split(".")]
            database, table = (parts[0], parts[1]) if len(parts) == 2 else (default, parts[0])
            changes = {(database, table)} if command.group("verb").upper().startswith("MSCK") else set()
            rewritten = f"{command.group('verb')} {ddl_name(self.spark_database(database), table)}"
            kind = "add_partition" if changes else "query"  # MSCK REPAIR TABLE adds the partitions it finds
            return Statement(rewritten, {(database, table)}, changes, {database}, kind=kind)
        try:
            parsed = sqlglot.parse(text, read="athena")
        except ParseError as error:
            raise LocalAthenaError(f"cannot parse statement: {str(error).splitlines()[0]}") from error
        if len(parsed) != 1 or parsed[0] is None or isinstance(parsed[0], exp.Command):
            raise LocalAthenaError(f"statement is not supported by the local Athena endpoint: {text[:80]}")
        tree = parsed[0]
        kind = str(tree.args.get("kind") or "").upper()
        if isinstance(tree, exp.Create | exp.Drop) and kind in {"DATABASE", "SCHEMA"}:
            return self._database_statement(tree, kind)
        ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        targets = list(tree.args.get("tables") or []) if isinstance(tree, exp.Drop) else []
        if isinstance(tree.this, exp.Expression) and isinstance(tree, exp.Create | exp.Alter | exp.Insert):
            targets.append(tree.this.find(exp.Table))
        statement = Statement("", set(), set(), set())
        for node in list(tree.find_all(exp.Table)):
            if not node.name or (not node.db and node.name.lower() in ctes):
                continue
            database, table = (node.db or default).lower(), node.name.lower()
            statement.tables.add((database, table))
            statement.databases.add(database)
            if any(node is target for target in targets):
                statement.changes.add((database, table))
            node.set("catalog", None)
            node.set("db", exp.to_identifier(self.spark_database(database), quoted=True))
        if isinstance(tree, exp.Create) and isinstance(tree.expression, exp.Query) and kind == "TABLE":
            self._place_ctas(tree, ctas_root)
            statement.writes_to = _ctas_location(tree)
        if isinstance(tree, exp.Create) and kind == "TABLE" and tree.expression is None:
            ((database, table),) = statement.changes
            statement.defines = _defined_table(tree, f"{database}.{table}")  # before the URIs become local
            statement.if_not_exists = bool(tree.args.get("exists"))
        for literal in list(tree.find_all(exp.Literal)):
            if literal.is_string and S3_URI.match(literal.this):
                statement.locations.append(literal.this)
                literal.replace(exp.Literal.string(self.local_uri(literal.this)))
        statement.sql = tree.sql("athena")
        statement.is_query = isinstance(tree, exp.Query)
        statement.kind = _kind(tree)
        return statement

    def _database_statement(self, tree: exp.Create | exp.Drop, kind: str) -> Statement:
        node = tree.this if isinstance(tree.this, exp.Table) else tree.find(exp.Table)
        if node is None:
            raise LocalAthenaError(f"{kind} statement names no database")
        database = node.name.lower()
        node.set("this", exp.to_identifier(self.spark_database(database), quoted=True))
        create = isinstance(tree, exp.Create)
        return Statement(
            tree.sql("athena"),
            set(),
            set(),
            {database},
            creates_database=database if create else None,
            drops_database=None if create else database,
        )

    @staticmethod
    def _place_ctas(tree: exp.Create, place: str) -> None:
        """A CTAS without ``external_location`` writes under the output location (``tables/<id>/``), as
        Athena's does: the table is external here too, and its files stay when it is dropped."""
        properties = tree.args.get("properties")
        names = {prop.name.lower() for prop in properties.expressions} if properties else set()
        if "external_location" in names or not place:
            return
        prop = exp.Property(this=exp.to_identifier("external_location"), value=exp.Literal.string(place))
        if properties is None:
            tree.set("properties", exp.Properties(expressions=[prop]))
        else:
            properties.append("expressions", prop)


def bucket_of(uri: str | None) -> str | None:
    """The bucket of an ``s3://`` URI (``None`` for anything else)."""
    found = S3_URI.match(uri or "")
    return found.group("bucket") if found else None
