"""The contract check reads Parquet files as Spark writes them: every type from the footer, and a file
with a mistyped, missing or renamed column is refused before any SQL (it used to fail its run and
every later run of its partition, or add all-NULL rows)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeline.engines.base import Column, TableSchema
from lakeline.engines.spark import SparkEngine
from lakeline.local.sample import write_single_parquet
from stage_a.contract import ContractViolation, RawContract, check_raw_file
from stage_a.parquet_schema import footer_length, parquet_columns
from stage_a.raw_files import LocalRawFile

COLUMNS = (
    "CAST(id AS BIGINT) AS id",
    "CAST(id AS INT) AS qty",
    "CAST(id AS SMALLINT) AS small",
    "CAST(id AS TINYINT) AS tiny",
    "CAST(id / 3 AS DOUBLE) AS ratio",
    "CAST(id AS FLOAT) AS score",
    "CAST(id AS DECIMAL(12,2)) AS amount",
    "CAST(id AS STRING) AS name",
    "id % 2 = 0 AS even",
    "DATE'2024-03-01' AS day",
    "TIMESTAMP'2024-03-01 10:00:00' AS at",
    "named_struct('city', 'x', 'zip', id) AS address",
    "array(id, id) AS ids",
    "map('k', id) AS attributes",
    "CAST(CAST(id AS STRING) AS BINARY) AS raw",
)
TYPES = [
    "bigint",
    "int",
    "smallint",
    "tinyint",
    "double",
    "float",
    "decimal(12,2)",
    "string",
    "boolean",
    "date",
    "timestamp",
    "struct",
    "array",
    "map",
    "binary",
]


def write(spark_engine: SparkEngine, path: Path, *columns: str) -> LocalRawFile:
    write_single_parquet(spark_engine.session.range(3).selectExpr(*columns), path)
    return LocalRawFile(path)


def contract(columns: dict[str, str]) -> RawContract:
    schema = TableSchema("raw", "t", tuple(Column(n, t) for n, t in columns.items()), format="parquet")
    return RawContract.of(schema)


def test_the_footer_gives_every_column_and_type(spark_engine: SparkEngine, tmp_path: Path) -> None:
    data = write(spark_engine, tmp_path / "all.parquet", *COLUMNS).path.read_bytes()
    length = footer_length(data[-8:])
    found = parquet_columns(data[-8 - length : -8])
    assert [(c.name, c.sql_type) for c in found] == [
        (expression.rsplit(" AS ", 1)[1], kind) for expression, kind in zip(COLUMNS, TYPES, strict=True)
    ]


def test_a_file_that_keeps_the_contract_passes_and_one_that_widens_a_type_too(
    spark_engine: SparkEngine, tmp_path: Path
) -> None:
    raw = write(spark_engine, tmp_path / "ok.parquet", "id", "CAST(id AS INT) AS qty", "CAST(id AS STRING) AS n")
    assert check_raw_file(contract({"id": "bigint", "qty": "bigint", "n": "string"}), raw) == ()


@pytest.mark.parametrize(
    ("columns", "reason"),
    [
        (("id", "CAST(id AS STRING) AS qty"), "column qty is string, table raw.t has int"),
        (("id", "CAST(id AS DOUBLE) AS qty"), "column qty is double, table raw.t has int"),
        (("id",), "lacks column qty of table raw.t"),
        (("id AS order_id", "CAST(id AS INT) AS quantity"), "lacks column id of table raw.t"),
        (("id", "CAST(id AS INT) AS qty", "id AS extra"), "has column extra not in table raw.t"),
    ],
)
def test_a_file_with_a_mistyped_missing_or_unknown_column_is_refused(
    spark_engine: SparkEngine, tmp_path: Path, columns: tuple[str, ...], reason: str
) -> None:
    raw = write(spark_engine, tmp_path / "bad.parquet", *columns)
    with pytest.raises(ContractViolation) as caught:
        check_raw_file(contract({"id": "bigint", "qty": "int"}), raw)
    assert str(caught.value).startswith(f"{raw.path}: ") and reason in str(caught.value)
