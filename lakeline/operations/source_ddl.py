"""The Athena DDL of a project's raw and stage tables, as a team writes it before the first arrival: each
table folder's columns from its first file (``lakeline.local.catalog.inferred_columns``, as the local
runtime makes its tables), the raw table over the raw bucket in the file's format, the stage table over
the stage bucket in the table's settings' format, both partitioned by the key's ``k=v`` folders."""

from __future__ import annotations

from pathlib import Path

from lakeline.engines.spark import SparkEngine
from lakeline.local.catalog import inferred_columns, raw_format
from lakeline.names import ddl_name, string_literal
from lakeline.settings import PipelineSettings
from stage_a.keys import RawObject, parse_raw_key

OPEN_CSV = "org.apache.hadoop.hive.serde2.OpenCSVSerde"
JSON_SERDE = "org.openx.data.jsonserde.JsonSerDe"
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


def source_tables_ddl(
    engine: SparkEngine, raw_dir: Path, keys: list[str], settings: PipelineSettings, existing: set[str]
) -> str:
    """The statements that create the raw and stage tables of the table folders of ``keys`` (files under
    ``raw_dir``) that are not in ``existing``; ``$raw_root`` and ``$stage_root`` stand for the buckets."""
    first: dict[tuple[str, str, str], RawObject] = {}
    for key in keys:
        raw = parse_raw_key(key)
        first.setdefault((raw.team, raw.dataset, raw.table), raw)
    statements: list[str] = []
    databases: list[str] = []
    for raw in first.values():
        raw_db, stage_db = settings.raw_database(raw.team, raw.dataset), settings.stage_database(raw.team, raw.dataset)
        missing = [
            (db, kind) for db, kind in ((raw_db, "raw"), (stage_db, "stage")) if f"{db}.{raw.table}" not in existing
        ]
        if not missing:
            continue
        columns = ", ".join(
            f"{ddl_name(name)} {kind}" for name, kind in inferred_columns(engine, raw, raw_dir / raw.key, settings)
        )
        keys_ddl = ", ".join(f"{ddl_name(column)} STRING" for column, _ in raw.partition)
        partitioned = f" PARTITIONED BY ({keys_ddl})" if keys_ddl else ""
        for database, kind in missing:
            if database not in databases:
                databases.append(database)
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
    heading = "-- Raw and stage tables, from each table's first file (lakeline run).\n"
    created = [f"CREATE DATABASE IF NOT EXISTS {ddl_name(database)};" for database in databases]
    return heading + "\n".join([*created, *statements]) + "\n" if statements else ""
