"""Athena-dialect SQL to Spark SQL.

Queries are translated by sqlglot. CTAS ``WITH (...)`` properties are mapped here, because sqlglot
turns them into TBLPROPERTIES, which Spark would store but not act on: Lakeline needs them to become
``USING``, ``OPTIONS``, ``PARTITIONED BY``, ``CLUSTERED BY ... INTO N BUCKETS`` and ``LOCATION``.
A bucketed CTAS also gets a ``REPARTITION(N, cols)`` hint, without which Spark writes one file per
bucket per task rather than N files in all. A Hive table over JSON lines (OpenX's or Hive's JSON SerDe,
for which Spark has no class) becomes a table of Spark's JSON reader, as ``engines.symlink`` reads one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from lakeline.engines.symlink import reader
from lakeline.errors import LakelineError, plain

SPARK_FORMATS = {"PARQUET": "parquet", "ORC": "orc", "JSON": "json", "TEXTFILE": "csv"}
COMPRESSION_PROPERTIES = ("write_compression", "parquet_compression", "orc_compression")


class TranslationError(LakelineError):
    """The statement cannot be expressed for Spark; nothing was executed."""


@dataclass
class CtasProperties:
    format: str = "PARQUET"
    compression: str | None = None
    external_location: str | None = None
    partitioned_by: list[str] = field(default_factory=list)
    bucketed_by: list[str] = field(default_factory=list)
    bucket_count: int | None = None
    field_delimiter: str | None = None


def _literal_text(node: exp.Expression, name: str) -> str:
    if isinstance(node, exp.Literal):
        return str(node.this)
    raise TranslationError(f"CTAS property {name} must be a literal, got {node.sql()}")


def _string_list(node: exp.Expression, name: str) -> list[str]:
    if isinstance(node, exp.Array):
        return [_literal_text(item, name) for item in node.expressions]
    raise TranslationError(f"CTAS property {name} must be ARRAY['col', ...], got {node.sql()}")


def read_ctas_properties(properties: exp.Properties | None) -> CtasProperties:
    """Collect Athena's CTAS ``WITH (...)`` properties; unknown ones are an error, not ignored."""
    result = CtasProperties()
    for prop in properties.expressions if properties else []:
        if isinstance(prop, exp.FileFormatProperty):
            result.format = _literal_text(prop.this, "format").upper()
        elif isinstance(prop, exp.PartitionedByProperty):
            result.partitioned_by = _string_list(prop.this, "partitioned_by")
        elif isinstance(prop, exp.Property):
            name = prop.name.lower()
            value = prop.args["value"]
            if name in COMPRESSION_PROPERTIES:
                result.compression = _literal_text(value, name).lower()
            elif name == "external_location":
                result.external_location = _literal_text(value, name)
            elif name == "bucketed_by":
                result.bucketed_by = _string_list(value, name)
            elif name == "bucket_count":
                count = _literal_text(value, name)
                if not count.isdigit() or int(count) < 1:
                    raise TranslationError(f"bucket_count must be a positive integer, got {count}")
                result.bucket_count = int(count)
            elif name == "field_delimiter":
                result.field_delimiter = _literal_text(value, name)
            else:
                raise TranslationError(f"CTAS property {name!r} is not supported on Spark")
        else:
            raise TranslationError(f"CTAS property {prop.sql('athena')!r} is not supported on Spark")
    if result.format not in SPARK_FORMATS:
        raise TranslationError(
            f"CTAS format {result.format!r} is not supported on Spark; use one of {sorted(SPARK_FORMATS)}"
        )
    if bool(result.bucketed_by) != (result.bucket_count is not None):
        raise TranslationError("bucketed_by and bucket_count must be given together")
    return result


def _quoted(names: list[str]) -> str:
    return ", ".join(exp.to_identifier(name, quoted=True).sql("spark") for name in names)


def _string(value: str) -> str:
    return exp.Literal.string(value).sql("spark")


@dataclass(frozen=True)
class SparkCtas:
    """A CTAS in Spark's terms: ``CREATE TABLE <table> <definition> AS <query>``."""

    table: str
    properties: CtasProperties
    definition: str  # USING, OPTIONS, PARTITIONED BY, CLUSTERED BY and LOCATION clauses
    query: str  # the SELECT, with the bucketing hint

    @property
    def sql(self) -> str:
        return f"CREATE TABLE {self.table} {self.definition} AS {self.query}"


def ctas_to_spark(create: exp.Create) -> SparkCtas:
    props = read_ctas_properties(create.args.get("properties"))
    query = create.expression
    options = []
    if props.compression:
        options.append(f"compression {_string(props.compression)}")
    if props.format == "TEXTFILE":
        # Athena's TEXTFILE default delimiter is \001 (Ctrl-A), as in Hive.
        options.append(f"sep {_string(props.field_delimiter or chr(1))}")
    clauses = [f"USING {SPARK_FORMATS[props.format]}"]
    if options:
        clauses.append(f"OPTIONS ({', '.join(options)})")
    if props.partitioned_by:
        clauses.append(f"PARTITIONED BY ({_quoted(props.partitioned_by)})")
    select_sql = query.sql("spark")
    if props.bucketed_by and props.bucket_count:
        clauses.append(f"CLUSTERED BY ({_quoted(props.bucketed_by)}) INTO {props.bucket_count} BUCKETS")
        # One bucket holds every row: no hash, and no shuffle, to put them there.
        hint = (
            "COALESCE(1)"
            if props.bucket_count == 1
            else f"REPARTITION({props.bucket_count}, {_quoted(props.bucketed_by)})"
        )
        select_sql = f"SELECT /*+ {hint} */ * FROM ({select_sql}) AS lakeline_ctas_source"
    if props.external_location:
        clauses.append(f"LOCATION {_string(props.external_location)}")
    return SparkCtas(create.this.sql("spark"), props, " ".join(clauses), select_sql)


def _json_serde(create: exp.Create) -> exp.RowFormatSerdeProperty | None:
    """The ``ROW FORMAT SERDE`` of a ``CREATE TABLE`` (not a CTAS) if its SerDe reads JSON lines."""
    properties = create.args.get("properties")
    if create.expression is not None or str(create.args.get("kind", "")).upper() != "TABLE" or not properties:
        return None
    serde = next((p for p in properties.expressions if isinstance(p, exp.RowFormatSerdeProperty)), None)
    return serde if serde is not None and "json" in serde.this.name.lower() else None


def json_table_to_spark(create: exp.Create, serde: exp.RowFormatSerdeProperty) -> str:
    """``CREATE [EXTERNAL] TABLE db.t (columns) ROW FORMAT SERDE '<a JSON SerDe>' [WITH SERDEPROPERTIES]
    [STORED AS TEXTFILE] [LOCATION] [TBLPROPERTIES]`` as a table of Spark's JSON reader: the SerDe's class is
    not on Spark's classpath, so the Hive table would fail its first read. Spark's reader matches keys with
    their case (the SerDes ignore it) and, like them, reads a number or boolean into a STRING column as its
    text; a malformed line fails the query unless ``ignore.malformed.json``."""
    listed = serde.args.get("serde_properties")
    serde_parameters = {
        item.name: _literal_text(item.args["value"], item.name) for item in (listed.expressions if listed else [])
    }
    table_parameters: dict[str, str] = {}
    location = ""
    for prop in create.args["properties"].expressions:
        text = isinstance(prop, exp.FileFormatProperty) and prop.name.upper() == "TEXTFILE"  # a JSON SerDe's files
        if text or isinstance(prop, (exp.ExternalProperty, exp.RowFormatSerdeProperty)):
            continue
        if isinstance(prop, exp.LocationProperty):
            location = _literal_text(prop.this, "LOCATION")
        elif isinstance(prop, exp.Property) and isinstance(prop.this, exp.Literal):
            table_parameters[prop.name] = _literal_text(prop.args["value"], prop.name)
        else:
            raise TranslationError(f"a JSON SerDe table's {prop.sql('hive')} is not supported on Spark")
    source, options = reader(serde.this.name, serde_parameters, table_parameters)
    clauses = [f"USING {source}"]
    if options:
        clauses.append(f"OPTIONS ({', '.join(f'{key} {_string(value)}' for key, value in options.items())})")
    if location:
        clauses.append(f"LOCATION {_string(location)}")
    exists = " IF NOT EXISTS" if create.args.get("exists") else ""
    return f"CREATE TABLE{exists} {create.this.sql('spark')} {' '.join(clauses)}"


def _athena_pseudo_columns(node: exp.Expression) -> exp.Expression:
    """Athena's ``"$path"`` pseudo column is Spark's ``input_file_name()``."""
    if isinstance(node, exp.Column) and node.name == "$path":
        return exp.Anonymous(this="input_file_name", expressions=[])
    return node


@dataclass(frozen=True)
class SparkStatement:
    sql: str
    ctas: SparkCtas | None = None


def athena_to_spark(sql: str) -> str:
    """Translate one Athena-dialect statement into one Spark SQL statement."""
    return translate_statement(sql).sql


ColumnTypes = Callable[[str, str], dict[str, str]]
"""The column types of a table (database, table), ``{}`` if it is not known."""


def _integer_division(statement: exp.Expression, columns: ColumnTypes, database: str | None) -> exp.Expression:
    """``statement`` with each ``/`` of two integers written as Spark's ``DIV`` (Trino's integer division,
    truncating toward zero); the types come from ``columns``. They are found on a qualified copy, whose
    divisions are the statement's in the same order, so the statement itself keeps its own text (its
    column names above all)."""
    from sqlglot.optimizer.annotate_types import annotate_types
    from sqlglot.optimizer.qualify import qualify

    schema: dict[str, object] = {}
    for table in statement.find_all(exp.Table):
        db = table.db or database
        found = columns(db, table.name) if db and table.name else {}
        if found and db:
            tables = schema.setdefault(db, {})
            assert isinstance(tables, dict)
            tables[table.name] = found
    try:
        typed = qualify(
            statement.copy(),
            schema=schema,
            db=database,
            dialect="athena",
            expand_stars=False,
            expand_alias_refs=False,
            validate_qualify_columns=False,
            quote_identifiers=False,
            identify=False,
        )
        annotate_types(typed, schema=schema)
    except Exception:  # a statement sqlglot cannot type keeps Spark's division
        return statement
    divisions, typed_divisions = list(statement.find_all(exp.Div)), list(typed.find_all(exp.Div))
    if len(divisions) != len(typed_divisions):
        return statement
    integers = exp.DataType.INTEGER_TYPES
    for division, typed_division in zip(divisions, typed_divisions, strict=True):
        if typed_division.this.is_type(*integers) and typed_division.expression.is_type(*integers):
            division.replace(exp.IntDiv(this=division.this, expression=division.expression))
    return statement


def translate_statement(
    sql: str, *, integer_division: ColumnTypes | None = None, database: str | None = None
) -> SparkStatement:
    """The Spark statement, and for a CTAS its Athena properties (the engine acts on some after it).
    ``integer_division``: translate ``/`` as Trino computes it, with the column types it gives (the local
    Athena; ``database``: where unqualified tables are)."""
    text = sql.strip().rstrip(";").strip()
    if text.upper().startswith("MSCK REPAIR TABLE"):
        # Same syntax in both; sqlglot only knows it as an opaque command.
        return SparkStatement(text)
    try:
        statements = sqlglot.parse(text, read="athena")
    except ParseError as error:
        raise TranslationError(plain(f"cannot parse statement: {error}")) from error
    if len(statements) != 1 or statements[0] is None:
        raise TranslationError(f"expected exactly one statement, got {len(statements)}")
    statement = statements[0].transform(_athena_pseudo_columns)
    if integer_division is not None and statement.find(exp.Div) is not None:
        statement = _integer_division(statement, integer_division, database)
    if (
        isinstance(statement, exp.Create)
        and isinstance(statement.expression, exp.Query)
        and str(statement.args.get("kind", "")).upper() == "TABLE"
    ):
        ctas = ctas_to_spark(statement)
        return SparkStatement(ctas.sql, ctas)
    if isinstance(statement, exp.Create) and (serde := _json_serde(statement)) is not None:
        return SparkStatement(json_table_to_spark(statement, serde))
    if isinstance(statement, exp.Command):
        raise TranslationError(f"statement is not supported on Spark: {text[:80]}")
    return SparkStatement(statement.sql("spark"))
