"""Bootstrapping the local catalog the way a data engineer sets up Glue before the first arrival.

In the cloud, raw and stage tables exist before data arrives (the seed requires it). Locally, the
first arrival of a table creates both from the file itself: the raw table over the raw folder with
the file's schema, and the stage table with the same columns, partitioned the same way.

The schema is the file's, so every name in it is checked before it reaches DDL: columns are lowercase
identifiers, and so are the fields nested in them (structs, arrays of structs, maps) except that their
case is kept, because JSON is read case-sensitively. A name outside that vocabulary (a space, a dash,
a quote, a backtick, ...) refuses the file with a one-line error naming it and the field's path; names
are written quoted all the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from lakeline.engines.base import TableSchema
from lakeline.engines.spark import SparkEngine, failure_reason
from lakeline.errors import InvalidInputError, LakelineError
from lakeline.names import check_field_name, check_identifier, ddl_name, string_literal
from lakeline.settings import PipelineSettings
from lakeline.storage import join_location
from stage_a.contract import check_file_format
from stage_a.keys import RawObject, parse_raw_key
from stage_a.raw_files import LocalRawFile

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

READERS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json"}
# RFC 4180, as the contract check reads them (stage_a.contract): quoted fields may hold newlines and
# doubled quotes.
CSV_OPTIONS = {"header": "true", "multiLine": "true", "quote": '"', "escape": '"'}
STAGE_FORMATS = {"PARQUET": "parquet", "ORC": "orc", "JSON": "json", "TEXTFILE": "csv"}


def raw_format(file_name: str) -> str:
    for suffix, reader in READERS.items():
        if file_name.lower().endswith(suffix) or file_name.lower().endswith(suffix + ".gz"):
            return reader
    raise InvalidInputError(f"cannot tell the format of raw file {file_name!r}: name it .parquet, .csv or .json")


def field_type_sql(data_type: DataType, path: str, file: str) -> str:
    """The DDL of a column's type with every nested field name checked and quoted; ``path`` is where the
    type sits (``payload``, ``payload.items[]``, ``tags{value}``), named with ``file`` in the error."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(data_type, StructType):
        fields = []
        for field in data_type.fields:
            name = check_field_name(field.name, f"raw file {file}: field under {path}")
            fields.append(f"`{name}`:{field_type_sql(field.dataType, f'{path}.{name}', file)}")
        return f"struct<{','.join(fields)}>"
    if isinstance(data_type, ArrayType):
        return f"array<{field_type_sql(data_type.elementType, f'{path}[]', file)}>"
    if isinstance(data_type, MapType):
        key = field_type_sql(data_type.keyType, f"{path}{{key}}", file)
        return f"map<{key},{field_type_sql(data_type.valueType, f'{path}{{value}}', file)}>"
    return data_type.simpleString()


def _column_list(schema_columns: list[tuple[str, str]]) -> str:
    return ", ".join(f"{ddl_name(name)} {kind}" for name, kind in schema_columns)


def inferred_columns(
    engine: SparkEngine, raw: RawObject, raw_file: Path, settings: PipelineSettings
) -> list[tuple[str, str]]:
    """The data columns (name, DDL type) of a raw table made from its first file: the file's schema, its
    partition columns left out. Every name is checked before it reaches DDL."""
    # The first file makes the table: one in another format than its name says would make a table that
    # refuses every good file after it.
    check_file_format(LocalRawFile(raw_file))
    reader = raw_format(raw.file_name)
    encoding = settings.table_settings(settings.stage_database(raw.team, raw.dataset), raw.table).encoding
    options = {**CSV_OPTIONS, "encoding": encoding, "inferSchema": "true"} if reader == "csv" else {}
    inferred = engine.session.read.format(reader).options(**options).load(str(raw_file))
    partition_columns = [column for column, _ in raw.partition]
    return [
        (name, field_type_sql(field.dataType, name, raw.key))
        for field in inferred.schema.fields
        if (name := check_identifier(field.name.lower(), f"raw file {raw.key}: column")) not in partition_columns
    ]


def first_files(keys: Iterable[str]) -> dict[str, RawObject]:
    """Each table folder (``team/dataset/table``) of ``keys`` → its first file in their order: the file its
    raw and stage tables are made from."""
    first: dict[str, RawObject] = {}
    for key in keys:
        raw = parse_raw_key(key)
        first.setdefault(raw.table_prefix.rstrip("/"), raw)
    return first


def split_by_table(keys: Iterable[str], refused: Mapping[str, str]) -> tuple[list[str], list[tuple[str, str]]]:
    """``keys`` in their order: those whose table folder ``refused`` does not name (their tables are there),
    and (key, reason) of each whose table folder it names (the caller parks them)."""
    taken: list[str] = []
    parked: list[tuple[str, str]] = []
    for key in keys:
        reason = refused.get(parse_raw_key(key).table_prefix.rstrip("/"))
        if reason is None:
            taken.append(key)
        else:
            parked.append((key, reason))
    return taken, parked


def table_errors() -> tuple[type[BaseException], ...]:
    """What making one table from its first file can raise that is that table's (its file cannot be read or
    typed, its DDL is refused), not the run's: the table's files are parked and the other tables go on."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    return (LakelineError, PySparkException, Py4JJavaError)


def table_refusal(database: str, first: RawObject, error: BaseException) -> str:
    """Why the raw table ``database``.<table> could not be made from ``first``, in one line."""
    reason = str(error) if isinstance(error, LakelineError) else failure_reason(error)
    reason = reason.removeprefix(f"raw file {first.key}: ")  # said once
    return f"table {database}.{first.table} cannot be made from its first file {first.key}: {' '.join(reason.split())}"


def ensure_tables(
    engine: SparkEngine, raw: RawObject, raw_file: Path, settings: PipelineSettings
) -> tuple[TableSchema, TableSchema]:
    """Create the raw and stage databases and tables if missing; return both schemas."""
    session = engine.session
    raw_db = settings.raw_database(raw.team, raw.dataset)
    stage_db = settings.stage_database(raw.team, raw.dataset)
    partition_columns = [column for column, _ in raw.partition]
    for database in (raw_db, stage_db):
        if not session.catalog.databaseExists(database):
            session.sql(f"CREATE DATABASE IF NOT EXISTS {ddl_name(database)}")
    if not engine.table_exists(raw_db, raw.table):
        columns = inferred_columns(engine, raw, raw_file, settings)
        reader = raw_format(raw.file_name)
        csv_options = {**CSV_OPTIONS, "encoding": settings.table_settings(stage_db, raw.table).encoding}
        all_columns = columns + [(column, "string") for column in partition_columns]
        listed = ", ".join(f"{key} {string_literal(value)}" for key, value in csv_options.items())
        option_sql = f" OPTIONS ({listed})" if reader == "csv" else ""
        partition_sql = (
            f" PARTITIONED BY ({', '.join(ddl_name(c) for c in partition_columns)})" if partition_columns else ""
        )
        location = join_location(settings.raw_root, raw.table_prefix)
        session.sql(
            f"CREATE TABLE {ddl_name(raw_db, raw.table)} ({_column_list(all_columns)}) USING {reader}"
            f"{option_sql}{partition_sql} LOCATION {string_literal(location)}"
        )
    raw_schema = engine.describe_table(raw_db, raw.table)
    if not engine.table_exists(stage_db, raw.table):
        table_cfg = settings.table_settings(stage_db, raw.table)
        all_columns = [(c.name, c.type) for c in raw_schema.columns + raw_schema.partition_columns]
        partition_sql = (
            f" PARTITIONED BY ({', '.join(ddl_name(c) for c in raw_schema.partition_names)})"
            if raw_schema.partition_columns
            else ""
        )
        location = join_location(settings.stage_root, raw.table_prefix)
        # Stage A writes TEXTFILE as Athena does, with Hive's \001 delimiter.
        text_options = " OPTIONS (sep '\u0001')" if table_cfg.format == "TEXTFILE" else ""
        session.sql(
            f"CREATE TABLE {ddl_name(stage_db, raw.table)} ({_column_list(all_columns)}) "
            f"USING {STAGE_FORMATS[table_cfg.format]}{text_options}{partition_sql} "
            f"LOCATION {string_literal(location)}"
        )
    return raw_schema, engine.describe_table(stage_db, raw.table)
