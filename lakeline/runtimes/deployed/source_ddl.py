"""The Athena DDL of a project's raw and stage tables, as a team writes it before the first arrival: each
table folder's columns from its first file (``lakeline.project.catalog.inferred_columns``, as the local
runtime makes its tables), the raw table over the raw bucket in the file's format, the stage table over
the stage bucket in the table's settings' format, both partitioned by the key's ``k=v`` folders. One
table's at a time: a table whose file cannot be typed, or whose DDL fails, is that table's failure."""

from __future__ import annotations

from pathlib import Path

from lakeline.engines.serdes import JSON_SERDE, OPEN_CSV
from lakeline.engines.spark import SparkEngine
from lakeline.names import ddl_name, string_literal
from lakeline.project.catalog import inferred_columns, raw_format
from lakeline.settings import PipelineSettings
from stage_a.keys import RawObject

RAW_STORAGE = {
    # Athena reads a header line as a row unless told to skip it; OpenCSVSerde reads RFC 4180 quoting.
    "csv": f"ROW FORMAT SERDE '{OPEN_CSV}' WITH SERDEPROPERTIES ('separatorChar' = ',', 'quoteChar' = '\"') "
    "STORED AS TEXTFILE",
    "json": f"ROW FORMAT SERDE '{JSON_SERDE}'",
    "parquet": "STORED AS PARQUET",
}
STAGE_STORAGE = {
    "PARQUET": "STORED AS PARQUET",
    "ORC": "STORED AS ORC",
    "JSON": f"ROW FORMAT SERDE '{JSON_SERDE}'",
    "TEXTFILE": "STORED AS TEXTFILE",
}


def source_table_ddl(
    engine: SparkEngine, raw_dir: Path, raw: RawObject, settings: PipelineSettings, existing: set[str]
) -> str:
    """The statements that create the raw and stage tables of ``raw``'s table folder from that file (under
    ``raw_dir``), those not in ``existing`` (none if both are); ``$raw_root`` and ``$stage_root`` stand for
    the buckets. Raises what ``lakeline.project.catalog.table_errors`` names if the file cannot be typed."""
    raw_db, stage_db = settings.raw_database(raw.team, raw.dataset), settings.stage_database(raw.team, raw.dataset)
    missing = [(db, kind) for db, kind in ((raw_db, "raw"), (stage_db, "stage")) if f"{db}.{raw.table}" not in existing]
    if not missing:
        return ""
    columns = ", ".join(
        f"{ddl_name(name)} {kind}" for name, kind in inferred_columns(engine, raw, raw_dir / raw.key, settings)
    )
    keys_ddl = ", ".join(f"{ddl_name(column)} STRING" for column, _ in raw.partition)
    partitioned = f" PARTITIONED BY ({keys_ddl})" if keys_ddl else ""
    statements = [f"CREATE DATABASE IF NOT EXISTS {ddl_name(database)};" for database, _ in missing]
    for database, kind in missing:
        if kind == "raw":
            storage = RAW_STORAGE[raw_format(raw.file_name)]
            header = " TBLPROPERTIES ('skip.header.line.count' = '1')" if raw_format(raw.file_name) == "csv" else ""
            location = f"$raw_root/{raw.table_prefix}"
        else:
            storage = STAGE_STORAGE[settings.table_settings(stage_db, raw.table).format]
            header = ""
            location = f"$stage_root/{raw.table_prefix}"
        statements.append(
            f"CREATE EXTERNAL TABLE IF NOT EXISTS {ddl_name(database, raw.table)} ({columns}){partitioned} "
            f"{storage} LOCATION {string_literal(location.rstrip('/') + '/')}{header};"
        )
    heading = f"-- The raw and stage tables of {raw.table_prefix}, from its first file {raw.key} (lakeline run).\n"
    return heading + "\n".join(statements) + "\n"
