"""The contract check reads Parquet files as Spark writes them: every type from the footer, down to the
fields of structs, arrays and maps, and a file with a mistyped, missing or renamed column or struct
field is refused before any SQL (it used to fail its run and every later run of its partition, add
all-NULL rows, or read a renamed struct field as NULL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeline.engines.base import Column, TableSchema
from lakeline.engines.spark import SparkEngine
from lakeline.runtimes.embedded.sample import write_single_parquet
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
    "struct<city:string,zip:bigint>",
    "array<bigint>",
    "map<string,bigint>",
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


NESTED_TABLE = {
    "id": "bigint",
    "address": "struct<city:string,zip:bigint>",
    "lines": "array<struct<sku:string,qty:int>>",
    "tags": "map<string,array<string>>",
}
NESTED_OK = (
    "id",
    "named_struct('city', 'x', 'zip', id) AS address",
    "array(named_struct('sku', 'a', 'qty', CAST(id AS INT))) AS lines",
    "map('k', array('v')) AS tags",
)


@pytest.mark.parametrize("legacy", [False, True], ids=["standard lists and maps", "Hive's legacy layout"])
def test_nested_columns_are_read_to_the_leaf_and_a_file_that_keeps_them_passes(
    spark_engine: SparkEngine, tmp_path: Path, legacy: bool
) -> None:
    # The legacy layout (Hive and Spark before 1.x, still written with writeLegacyFormat): lists as
    # ``repeated group bag { array }``, maps' key_value group named ``map``.
    spark_engine.session.conf.set("spark.sql.parquet.writeLegacyFormat", str(legacy).lower())
    try:
        raw = write(spark_engine, tmp_path / "nested.parquet", *NESTED_OK)
    finally:
        spark_engine.session.conf.unset("spark.sql.parquet.writeLegacyFormat")
    length = footer_length(raw.path.read_bytes()[-8:])
    found = parquet_columns(raw.path.read_bytes()[-8 - length : -8])
    assert {c.name: c.sql_type for c in found} == NESTED_TABLE
    assert check_raw_file(contract(NESTED_TABLE), raw) == ()
    # Spark's own name for the same types is what the catalog gives: the contract reads it alike.
    spark_types = {f.name: f.dataType.simpleString() for f in spark_engine.session.read.parquet(str(raw.path)).schema}
    assert check_raw_file(contract(spark_types), raw) == ()


@pytest.mark.parametrize(
    ("replace", "reason"),
    [
        ({1: "named_struct('city', 'x') AS address"}, "column address lacks field address.zip"),
        ({1: "named_struct('city', 'x', 'zip', id, 'street', 'y') AS address"}, "has field address.street"),
        ({1: "named_struct('city', 'x', 'zip', 'z') AS address"}, "field address.zip is string, not bigint"),
        ({1: "named_struct('town', 'x', 'zip', id) AS address"}, "column address lacks field address.city"),
        ({2: "array(named_struct('sku', 1, 'qty', 2)) AS lines"}, "field lines[].sku is int, not string"),
        ({2: "array('a') AS lines"}, "field lines[] is string, not struct<sku:string,qty:int>"),
        ({3: "map('k', 'v') AS tags"}, "field tags[value] is string, not array<string>"),
        ({1: "'x' AS address"}, "column address is string"),
    ],
)
def test_a_file_with_a_missing_extra_or_mistyped_nested_field_is_refused(
    spark_engine: SparkEngine, tmp_path: Path, replace: dict[int, str], reason: str
) -> None:
    columns = [replace.get(index, expression) for index, expression in enumerate(NESTED_OK)]
    raw = write(spark_engine, tmp_path / "bad.parquet", *columns)
    with pytest.raises(ContractViolation) as caught:
        check_raw_file(contract(NESTED_TABLE), raw)
    assert str(caught.value).startswith(f"{raw.path}: ") and reason in str(caught.value), str(caught.value)


def test_a_struct_the_catalog_abbreviates_is_compared_by_its_family(spark_engine: SparkEngine, tmp_path: Path) -> None:
    """Spark's catalog gives a struct of more than 25 fields as ``struct<...,... 6 more fields>``: the
    contract cannot read its fields, so it checks what it can (a struct) and lets the file pass."""
    fields = ", ".join(f"'f{i}', CAST(id AS INT)" for i in range(30))
    raw = write(spark_engine, tmp_path / "wide.parquet", "id", f"named_struct({fields}) AS wide")
    abbreviated = "struct<" + ",".join(f"f{i}:int" for i in range(24)) + ",... 6 more fields>"
    assert check_raw_file(contract({"id": "bigint", "wide": abbreviated}), raw) == ()
    flat = write(spark_engine, tmp_path / "flat.parquet", "id", "CAST(id AS INT) AS wide")
    with pytest.raises(ContractViolation, match="column wide is int"):
        check_raw_file(contract({"id": "bigint", "wide": abbreviated}), flat)
