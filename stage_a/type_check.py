"""The full type check of a run's CSV and JSON-lines files, in the engine, before the run's CTAS (#39).

The door (``stage_a.contract``) type-checks only a sample of a large text file; past it, Athena's SerDes
and Spark's permissive readers read a value that is not of its column's type as NULL. So a stage A run
over CSV or JSON raw files first reads the same files as text and looks for such values, with the
door's rule, in one query:

1. ``create``: an external table, every column STRING, in the raw table's format (a CSV header line
   skipped), so a value is seen as written: over a symlink manifest of the run's new files
   (``stage_a.manifest``), so the statement is the same size whatever the batch; a run without a lease
   (the seed's whole-partition rewrite) reads the raw partition's folder;
2. ``check``: one scan of those files keeping, per row, the first
   column whose non-empty value is not of its type; grouped by file and column, at most one group,
   with up to three of its values. On Athena (Trino) and on Spark in ANSI mode the query itself fails,
   its error naming the file, column and values (a cast of that message to INTEGER is what fails:
   Athena SQL has no ``raise_error``); on Spark without ANSI mode it returns the group as its one row,
   and ``refusal`` words the same reason;
3. ``drop``: drop the text table (metadata only), whatever the check found.

JSON lines go through the JSON SerDe (OpenX's, as the raw table's; Spark's JSON reader on Spark,
``lakeline.engines.translate``), whose STRING column reads a number or boolean as its text (Athena
canonicalizes a number with BigDecimal: ``1e3`` is ``1E+3``; Spark keeps it as written) and a key
matched ignoring case on Athena, with its case on Spark. Only the checked columns are declared (the
SerDe reads by key), and an empty string is checked too (the door refuses it for a typed column).
What a STRING column cannot show is a value's JSON type: a quoted ``"5"`` for a number column, or
``"true"`` for a boolean, passes here though the door refuses it (Athena reads it as the number,
Spark as NULL); so does a key spelled in another case past the door's sample, on Spark.

Parquet and ORC files are typed: no check. Nor are STRING and nested columns checked (any text is a
string; a nested value's fields are not reached by a text column).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakeline.engines.base import QueryFailed, TableSchema
from lakeline.engines.serdes import JSON_SERDE, OPEN_CSV
from lakeline.errors import InvalidInputError
from lakeline.names import check_identifier, ddl_name, dml_name, string_literal
from stage_a.manifest import symlink_table_ddl

TEXT_FILE_FORMATS = ("csv", "json")
SHOWN_VALUES = 3  # bad values named in the reason
SHOWN_CHARACTERS = 40  # of each value
PREFIX = "lakeline type check: "

# The door's patterns (stage_a.contract), without backslashes: a backslash is an escape in Spark's
# string literals and a character in Trino's.
_INTEGER = "^[+-]?[0-9]+$"
_NUMBER = "^[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?$"
_DATE = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_DATE_START = "^[0-9]{4}-[0-9]{2}-[0-9]{2}"
_INTEGERS = {"tinyint": "TINYINT", "smallint": "SMALLINT", "int": "INTEGER", "integer": "INTEGER", "bigint": "BIGINT"}
_LARGEST_DOUBLE = "1.7976931348623157E308"


@dataclass(frozen=True)
class TypeCheck:
    """The three statements of a run's type check, in the order they run (``drop`` also after a failure)."""

    table: str  # the text table, in the stage database
    create: str  # Athena DDL, or (``spark_ddl``) Spark's, for a table only Spark reads
    check: str
    drop: str
    spark_ddl: bool = False


class TypeCheckFailed(QueryFailed):
    """The run's files hold a value not of its column's type: its reason names the file, column and values."""


def text_table_name(temp_table: str) -> str:
    """The text table of a run whose CTAS temp table is ``temp_table`` (``lakeline_tmp_<table>_<token>``)."""
    return check_identifier(f"{temp_table}_text", "type check table")


def _valid(kind: str, value: str) -> str | None:
    """A condition true when ``value`` (trimmed text) is of the Hive type ``kind`` as the door reads it,
    or ``None`` when every text is (STRING, nested and unknown types)."""
    family = kind.strip().lower().replace(" ", "")
    if family in _INTEGERS:
        return f"regexp_like({value}, '{_INTEGER}') AND try_cast({value} AS {_INTEGERS[family]}) IS NOT NULL"
    number = f"regexp_like({value}, '{_NUMBER}')"
    if family in ("double", "float"):
        return f"{number} AND abs(try_cast({value} AS DOUBLE)) <= {_LARGEST_DOUBLE}"
    if family.startswith("decimal("):
        # Athena rounds a value with more decimals than the scale; the door refuses it: the value as a
        # DOUBLE must be the value as the column's DECIMAL.
        typed = f"try_cast({value} AS {family.upper()})"
        return f"{number} AND {typed} IS NOT NULL AND CAST({typed} AS DOUBLE) = try_cast({value} AS DOUBLE)"
    if family == "boolean":
        return f"lower({value}) IN ('true', 'false')"
    if family == "date":
        return f"regexp_like({value}, '{_DATE}') AND try_cast({value} AS DATE) IS NOT NULL"
    if family in ("timestamp", "timestamp_ntz"):
        return f"regexp_like({value}, '{_DATE_START}') AND try_cast({value} AS TIMESTAMP) IS NOT NULL"
    return None


def _storage(schema: TableSchema, encoding: str) -> str:
    """The raw table's format, for a table whose columns are all STRING."""
    if schema.format == "json":
        return f"ROW FORMAT SERDE '{JSON_SERDE}'"
    delimiter = string_literal(schema.delimiter or ",")
    if schema.multiline_fields:
        # Only Spark reads quoted fields across lines (the embedded runtime's raw tables): Spark's own CSV
        # reader, as the raw table's, since its Hive SerDes read one record per line. Athena never reads
        # such a table, so never this DDL.
        quote = string_literal(schema.quote) if schema.quote else "''"
        options = f"'header' = 'true', 'multiLine' = 'true', 'quote' = {quote}, 'escape' = {quote}, 'sep' = {delimiter}"
        return f"USING csv OPTIONS ({options}, 'encoding' = {string_literal(encoding)})"
    if not schema.quote:  # never quoted: LazySimpleSerDe, as the raw table's DDL has it
        return f"ROW FORMAT DELIMITED FIELDS TERMINATED BY {delimiter} STORED AS TEXTFILE"
    return (
        f"ROW FORMAT SERDE '{OPEN_CSV}' WITH SERDEPROPERTIES ('separatorChar' = {delimiter}, "
        f"'quoteChar' = {string_literal(schema.quote)}) STORED AS TEXTFILE"
    )


def plan_type_check(
    schema: TableSchema,
    *,
    database: str,
    temp_table: str,
    manifest: str | None = None,
    location: str | None = None,
    encoding: str = "utf-8",
) -> TypeCheck | None:
    """The type check of the raw table ``schema``'s files that the manifest folder ``manifest`` lists
    (``stage_a.manifest``), or else of every file under ``location`` (the raw partition's folder), or
    ``None`` when there is nothing to check (a typed format, only STRING columns)."""
    fmt = schema.format or "csv"
    if fmt not in TEXT_FILE_FORMATS:
        return None
    checks = [
        (column.name, column.type, _valid(column.type, f"trim({dml_name(column.name)})")) for column in schema.columns
    ]
    typed = [(name, kind, valid) for name, kind, valid in checks if valid is not None]
    if not typed:
        return None
    table = text_table_name(temp_table)
    is_json = fmt == "json"
    # CSV is read by position: every column; JSON by key: the checked ones.
    declared = [name for name, _, _ in typed] if is_json else [column.name for column in schema.columns]
    if manifest is not None:
        # Spark's engine reads a multi-line CSV symlink table with its own CSV reader (engines.symlink).
        spark_ddl = False
        strings = [(name, "STRING") for name in declared]
        create = symlink_table_ddl(
            schema, database=database, table=table, columns=strings, manifest=manifest, encoding=encoding
        )
    elif location is not None:
        spark_ddl = schema.multiline_fields and not is_json
        columns = ", ".join(f"{ddl_name(name)} STRING" for name in declared)
        header = "" if spark_ddl or is_json else " TBLPROPERTIES ('skip.header.line.count' = '1')"
        external = "" if spark_ddl else "EXTERNAL "
        create = (
            f"CREATE {external}TABLE {ddl_name(database, table)} ({columns}) {_storage(schema, encoding)} "
            f"LOCATION {string_literal(location.rstrip('/') + '/')}{header}"
        )
    else:
        raise InvalidInputError("a type check reads a manifest or a folder")
    # An empty CSV field is NULL (Athena's OpenCSVSerde reads it as '', Spark's reader as NULL); an empty
    # JSON string is a value the door refuses for a typed column. Each column's condition is written once
    # (the statement grows by one condition per column): the first bad column's number, then its name and
    # value picked from arrays by that number.
    present = "IS NOT NULL" if is_json else "<> ''"
    bad = [f"{dml_name(name)} {present} AND NOT coalesce({valid}, false)" for name, _, valid in typed]
    which = " ".join(f"WHEN {condition} THEN {number}" for number, condition in enumerate(bad, start=1))
    named = ", ".join(string_literal(f"{name} ({kind})") for name, kind, _ in typed)
    values = ", ".join(f"substr({dml_name(name)}, 1, {SHOWN_CHARACTERS})" for name, _, _ in typed)
    where = []
    if not schema.multiline_fields and not is_json:
        # A reader that does not skip the header line (Spark's Hive SerDe tables) reads it as a row:
        # the row whose every field is its column's name.
        names = " AND ".join(
            f"lower(trim({dml_name(c.name)})) = {string_literal(c.name.lower())}" for c in schema.columns
        )
        where.append(f"NOT coalesce({names}, false)")
    rows = (
        f'SELECT "$path" AS lakeline_file, CASE {which} END AS lakeline_index, ARRAY[{values}] AS lakeline_texts '
        f"FROM {dml_name(database, table)}" + (f" WHERE {' AND '.join(where)}" if where else "")
    )
    picked = (
        f"SELECT lakeline_file, element_at(ARRAY[{named}], lakeline_index) AS lakeline_column, "
        "element_at(lakeline_texts, lakeline_index) AS lakeline_value "
        f"FROM ({rows}) AS lakeline_rows WHERE lakeline_index IS NOT NULL"
    )
    groups = (
        "SELECT lakeline_file, lakeline_column, "
        f"array_join(slice(array_agg(lakeline_value), 1, {SHOWN_VALUES}), ' | ') AS lakeline_values "
        f"FROM ({picked}) AS lakeline_picked GROUP BY lakeline_file, lakeline_column"
    )
    message = (
        f"concat('{PREFIX}', lakeline_file, ', column ', lakeline_column, "
        "' has values not of its type: ', lakeline_values)"
    )
    check = (
        f"SELECT lakeline_file, lakeline_column, lakeline_values, CAST({message} AS INTEGER) AS lakeline_refused "
        f"FROM ({groups}) AS lakeline_bad LIMIT 1"
    )
    drop = f"DROP TABLE IF EXISTS {ddl_name(database, table)}"
    return TypeCheck(table=table, create=create, check=check, drop=drop, spark_ddl=spark_ddl)


def refusal(rows: list[tuple[Any, ...]]) -> str | None:
    """The reason the check's result rows give (an engine that returned them instead of failing)."""
    if not rows:
        return None
    file, column, values, *_ = rows[0]
    return f"{PREFIX}{file}, column {column} has values not of its type: {values}"
