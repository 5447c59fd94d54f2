"""Symlink tables on Spark, read as Athena reads them (#39).

A table ``STORED AS INPUTFORMAT 'org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat'`` has manifest files
at its location, each line the location of a data file; Athena reads the listed files with the table's
SerDe (Parquet, ORC, JSON, text). Spark's Hive reader takes the input format's text records as the data,
so Parquet or ORC through it cannot work: Lakeline's Spark engine keeps such a table to itself (it never
reaches the metastore) and reads it as a DataFrame over the listed files in the SerDe's format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from lakeline.engines.serdes import LAZY_SIMPLE
from lakeline.errors import InvalidInputError

SYMLINK_INPUT_FORMAT = "org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat"
MULTILINE_PROPERTY = "lakeline.multiline_fields"
"""A table property of Lakeline's own: a CSV table whose quoted fields span lines (only Spark reads those)."""


@dataclass(frozen=True)
class SymlinkTable:
    """What reading a symlink table takes: its columns (Spark DDL), the data source and options that read
    its files as its SerDe does, and the folder of its manifests."""

    columns: str
    format: str
    location: str
    options: Mapping[str, str] = field(default_factory=dict)


def is_symlink_table(sql: str) -> bool:
    return SYMLINK_INPUT_FORMAT.lower() in sql.lower() and sql.lstrip()[:6].upper() == "CREATE"


def reader(
    serde: str, serde_parameters: Mapping[str, str], table_parameters: Mapping[str, str]
) -> tuple[str, dict[str, str]]:
    """The Spark data source and options that read files as the SerDe ``serde`` does."""
    library = serde.lower()
    for marker in ("parquet", "orc"):
        if marker in library:
            return marker, {}
    if "json" in library:
        ignored = str(serde_parameters.get("ignore.malformed.json", "false")).lower() == "true"
        return "json", {"mode": "PERMISSIVE" if ignored else "FAILFAST"}
    lazy = not library or "lazysimpleserde" in library
    if not lazy and "opencsvserde" not in library:
        raise InvalidInputError(f"SerDe {serde} cannot be read through a symlink table")
    skip = str(table_parameters.get("skip.header.line.count", "0"))
    if skip not in {"0", "1"}:
        raise InvalidInputError(f"skip.header.line.count {skip} is not supported (0 or 1)")
    options = {
        "sep": str(
            serde_parameters.get("separatorChar") or serde_parameters.get("field.delim") or ("\u0001" if lazy else ",")
        ),
        "quote": "" if lazy else str(serde_parameters.get("quoteChar", '"')),
        "header": "true" if skip == "1" else "false",
    }
    escape = serde_parameters.get("escapeChar") or serde_parameters.get("escape.delim")
    if escape:
        options["escape"] = str(escape)
    if str(table_parameters.get(MULTILINE_PROPERTY, "")).lower() == "true":
        options |= {"multiLine": "true", "escape": options["quote"] or '"'}
        options["encoding"] = str(
            serde_parameters.get("serialization.encoding") or table_parameters.get("serialization.encoding") or "utf-8"
        )
    return "csv", options


def _literal(node: object, what: str) -> str:
    if not isinstance(node, exp.Literal) or not node.is_string:
        raise InvalidInputError(f"symlink table: {what} must be a string literal")
    return str(node.this)


def parse_symlink_table(sql: str) -> tuple[str, SymlinkTable]:
    """(``database.table`` lowercased, the table) of an Athena ``CREATE EXTERNAL TABLE`` over manifests."""
    try:
        tree = sqlglot.parse_one(sql, read="athena")
    except ParseError as error:
        raise InvalidInputError(f"cannot parse a symlink table's DDL: {str(error).splitlines()[0]}") from error
    if not isinstance(tree, exp.Create) or not isinstance(tree.this, exp.Schema):
        raise InvalidInputError("a symlink table's DDL is CREATE EXTERNAL TABLE db.table (columns) ...")
    table = tree.this.this
    if not isinstance(table, exp.Table) or not table.db:
        raise InvalidInputError("a symlink table's name must be qualified with its database")
    columns = ", ".join(
        f"`{column.name}` {column.args['kind'].sql('spark')}"
        for column in tree.this.expressions
        if isinstance(column, exp.ColumnDef) and column.args.get("kind") is not None
    )
    serde, location = LAZY_SIMPLE, ""
    serde_parameters: dict[str, str] = {}
    table_parameters: dict[str, str] = {}
    properties = tree.args.get("properties")
    for prop in properties.expressions if properties else []:
        if isinstance(prop, exp.RowFormatSerdeProperty):
            serde = _literal(prop.this, "ROW FORMAT SERDE")
            listed = prop.args.get("serde_properties")
            for item in listed.expressions if listed else []:
                serde_parameters[_literal(item.this, "a SerDe property")] = _literal(
                    item.args.get("value"), "a SerDe property"
                )
        elif isinstance(prop, exp.RowFormatDelimitedProperty):
            if prop.args.get("fields") is not None:
                serde_parameters["field.delim"] = _literal(prop.args["fields"], "FIELDS TERMINATED BY")
        elif isinstance(prop, exp.LocationProperty):
            location = _literal(prop.this, "LOCATION")
        elif isinstance(prop, exp.Property) and isinstance(prop.this, exp.Literal):
            table_parameters[str(prop.this.this)] = _literal(prop.args.get("value"), f"TBLPROPERTIES {prop.name!r}")
    if not location:
        raise InvalidInputError("a symlink table needs a LOCATION (the folder of its manifests)")
    source, options = reader(serde, serde_parameters, table_parameters)
    name = f"{table.db}.{table.name}".lower()
    return name, SymlinkTable(columns=columns, format=source, location=location, options=options)
