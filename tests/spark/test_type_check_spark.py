"""The engine's type check of CSV and JSON raw files (#39) on real embedded Spark: as the embedded runtime
and the Glue job run it (Spark 3.5's semantics: the check returns the bad group) and as the local Athena
runs it (Athena's: the check fails with the reason)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import stage_a.contract as contract_module
from lakeline.engines.base import Column, TableSchema
from lakeline.engines.spark import SparkEngine
from lakeline.engines.spark_semantics import ATHENA
from lakeline.names import ddl_name
from lakeline.runtimes.embedded.cloud import LocalCloud
from stage_a.run import check_types
from stage_a.type_check import TypeCheck, TypeCheckFailed, plan_type_check
from tests.spark.test_local_door import arrive, flow, parked, rows

_databases = itertools.count()


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    started = LocalCloud.start()
    try:
        yield started
    finally:
        started.stop()


COLUMNS = (
    Column("id", "bigint"),
    Column("name", "string"),
    Column("amount", "decimal(10,2)"),
    Column("ratio", "double"),
    Column("day", "date"),
    Column("seen", "timestamp"),
    Column("ok", "boolean"),
    Column("small", "int"),
)
GOOD = (
    "1,a,1.25,0.5,2022-01-20,2022-01-20 10:00:00,true,7\n2,,,,,,,\n"
    '3,"b, c",-3,1e3,2022-02-28,2022-02-28T01:02:03,FALSE,-2147483648\n'
)


def _check(
    engine: SparkEngine,
    folder: Path,
    files: dict[str, str],
    *,
    multiline: bool = False,
    columns: tuple[Column, ...] = COLUMNS,
    fmt: str = "csv",
) -> TypeCheck:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    database = f"tc{next(_databases)}"
    engine.execute(f"CREATE DATABASE IF NOT EXISTS {ddl_name(database)}")
    schema = TableSchema(database=database, table="sales", columns=columns, format=fmt, multiline_fields=multiline)
    # Read as a leased run reads its new files: through a symlink manifest listing them (stage_a.manifest).
    manifest = folder.parent / f"{folder.name}_manifest"
    manifest.mkdir(exist_ok=True)
    (manifest / "manifest").write_text("".join(f"{(folder / name).as_uri()}\n" for name in sorted(files)))
    check = plan_type_check(
        schema,
        database=database,
        temp_table="lakeline_tmp_sales_t1",
        manifest=manifest.as_uri() + "/",
        encoding="utf-8",
    )
    assert check is not None
    return check


@pytest.mark.parametrize("multiline", [False, True], ids=["serde", "spark-csv"])
def test_good_csv_files_pass_and_the_text_table_is_dropped(
    spark_engine: SparkEngine, tmp_path: Path, multiline: bool
) -> None:
    header = ",".join(column.name for column in COLUMNS) + "\n"
    spanning = '5,"two\nlines",1,1,2022-01-01,2022-01-01,true,1\n' if multiline else ""
    check = _check(spark_engine, tmp_path / "raw", {"a.csv": header + GOOD + spanning}, multiline=multiline)
    check_types(check, spark_engine, check.create.split("`")[1])
    assert not spark_engine.table_exists(check.create.split("`")[1], check.table)


@pytest.mark.parametrize("multiline", [False, True], ids=["serde", "spark-csv"])
@pytest.mark.parametrize("athena", [False, True], ids=["spark", "athena"])
@pytest.mark.parametrize(
    ("line", "column", "value"),
    [
        ("4,d,1.255,1,2022-01-01,2022-01-01,true,1", "amount (decimal(10,2))", "1.255"),
        ("x,d,1,1,2022-01-01,2022-01-01,true,1", "id (bigint)", "x"),
        ("4,d,1,NaN,2022-01-01,2022-01-01,true,1", "ratio (double)", "NaN"),
        ("4,d,1,1,2022-13-01,2022-01-01,true,1", "day (date)", "2022-13-01"),
        ("4,d,1,1,2022-01-01,yesterday,true,1", "seen (timestamp)", "yesterday"),
        ("4,d,1,1,2022-01-01,2022-01-01,yes,1", "ok (boolean)", "yes"),
        ("4,d,1,1,2022-01-01,2022-01-01,true,2147483648", "small (int)", "2147483648"),
    ],
)
def test_a_bad_value_anywhere_fails_the_check_naming_file_column_and_value(
    spark_engine: SparkEngine, tmp_path: Path, line: str, column: str, value: str, athena: bool, multiline: bool
) -> None:
    header = ",".join(c.name for c in COLUMNS) + "\n"
    check = _check(
        spark_engine,
        tmp_path / "raw",
        {"a.csv": header + GOOD, "b.csv": header + GOOD * 50 + line + "\n"},
        multiline=multiline,
    )
    message = _failure(spark_engine, check, athena=athena)
    assert "lakeline type check: " in message and "b.csv, column " + column in message and value in message


def _failure(engine: SparkEngine, check: TypeCheck, *, athena: bool) -> str:
    """The reason the check fails with, on Spark or (``athena``) with Athena's semantics; its table dropped."""
    database = check.create.split("`")[1]
    with pytest.raises(TypeCheckFailed) as failed:
        if athena:
            with engine.imposed(ATHENA):
                check_types(check, engine, database)
        else:
            check_types(check, engine, database)
    assert not engine.table_exists(database, check.table)  # dropped after the failure too
    return str(failed.value)


def test_the_check_is_valid_athena_sql_that_spark_refuses_nothing_of(spark_engine: SparkEngine, tmp_path: Path) -> None:
    check = _check(spark_engine, tmp_path / "raw", {"a.csv": ",".join(c.name for c in COLUMNS) + "\n" + GOOD})
    database = check.create.split("`")[1]
    spark_engine.execute(check.create, database=database)
    try:
        with spark_engine.imposed(ATHENA):
            assert spark_engine.execute(check.check, database=database).rows == []
    finally:
        spark_engine.execute(check.drop, database=database)


def test_the_embedded_runtime_parks_a_file_whose_bad_value_is_past_the_doors_sample(
    spark_engine: SparkEngine, cloud: LocalCloud, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(contract_module, "DOOR_CHECK_CHARACTERS", 200)
    events = flow(spark_engine, cloud, tmp_path, "reject")
    parked(cloud)
    good = "".join(f"s{n},{n}.5\n" for n in range(100))
    arrive(events, "shop/pos/sales/day=1/a.csv", "store,amount\n" + good)
    # The door reads 200 characters: the bad value lies past them.
    arrive(events, "shop/pos/sales/day=1/b.csv", "store,amount\n" + good + "x,oops\n" + good)
    arrive(events, "shop/pos/sales/day=1/c.csv", "store,amount\ne,3\n")

    loaded = rows(spark_engine, events)
    assert len(loaded) == 101 and ("e", 3.0, "1") in loaded  # a's and c's rows; none of b's, no NULLs
    (letter,) = parked(cloud)
    assert json.loads(str(letter["Body"]))["detail"]["object"]["key"] == "shop/pos/sales/day=1/b.csv"
    reason = letter["MessageAttributes"]["lakeline_reason"]["StringValue"]  # type: ignore[index]
    assert "b.csv, column amount (double) has values not of its type: oops" in reason, reason


JSON_COLUMNS = (*COLUMNS, Column("ship", "struct<city:string>"))
JSON_GOOD = (
    '{"id": 1, "name": "a", "amount": 1.25, "ratio": 0.5, "day": "2022-01-20", "seen": "2022-01-20 10:00:00", '
    '"ok": true, "small": 7, "ship": {"city": "Rome"}}\n'
    '{"id": 2, "name": null, "amount": null, "ratio": null, "day": null, "seen": null, "ok": null, "small": null}\n'
    '{"ID": 3, "name": 5, "amount": -3, "ratio": 1e3, "day": "2022-02-28", "seen": "2022-02-28T01:02:03", '
    '"ok": false, "small": -2147483648}\n\n'
)


def test_good_json_lines_pass_through_the_json_serde_table_and_it_is_dropped(
    spark_engine: SparkEngine, tmp_path: Path
) -> None:
    check = _check(spark_engine, tmp_path / "raw", {"a.json": JSON_GOOD}, columns=JSON_COLUMNS, fmt="json")
    database = check.create.split("`")[1]
    check_types(check, spark_engine, database)
    with spark_engine.imposed(ATHENA):
        check_types(check, spark_engine, database)
    assert not spark_engine.table_exists(database, check.table)


@pytest.mark.parametrize("athena", [False, True], ids=["spark", "athena"])
@pytest.mark.parametrize(
    ("line", "column", "value"),
    [
        ('{"id": "abc"}', "id (bigint)", "abc"),
        ('{"id": 1.5}', "id (bigint)", "1.5"),
        ('{"id": ""}', "id (bigint)", ""),
        ('{"amount": 1.255}', "amount (decimal(10,2))", "1.255"),
        ('{"ratio": "NaN"}', "ratio (double)", "NaN"),
        ('{"day": 20220101}', "day (date)", "20220101"),
        ('{"seen": "yesterday"}', "seen (timestamp)", "yesterday"),
        ('{"ok": "yes"}', "ok (boolean)", "yes"),
        ('{"small": 2147483648}', "small (int)", "2147483648"),
    ],
)
def test_a_bad_json_value_anywhere_fails_the_check_naming_file_column_and_value(
    spark_engine: SparkEngine, tmp_path: Path, line: str, column: str, value: str, athena: bool
) -> None:
    files = {"a.json": JSON_GOOD, "b.json": JSON_GOOD * 50 + line + "\n"}
    check = _check(spark_engine, tmp_path / "raw", files, columns=JSON_COLUMNS, fmt="json")
    message = _failure(spark_engine, check, athena=athena)
    assert f"b.json, column {column} has values not of its type: {value}" in message, message


def test_the_embedded_runtime_parks_a_json_file_whose_bad_value_is_past_the_doors_sample(
    spark_engine: SparkEngine, cloud: LocalCloud, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(contract_module, "DOOR_CHECK_CHARACTERS", 200)
    events = flow(spark_engine, cloud, tmp_path, "reject")
    parked(cloud)
    good = "".join(f'{{"store": "s{n}", "qty": {n}}}\n' for n in range(100))
    arrive(events, "shop/pos/sales/day=1/a.json", good)
    # The door reads 200 characters: the bad value lies past them. Spark's reader would load it as NULL.
    arrive(events, "shop/pos/sales/day=1/b.json", good + '{"store": "x", "qty": "abc"}\n' + good)
    arrive(events, "shop/pos/sales/day=1/c.json", '{"store": "e", "qty": 3}\n')

    loaded = rows(spark_engine, events)
    assert len(loaded) == 101 and (3, "e", "1") in loaded  # a's and c's rows (keys in order); none of b's
    (letter,) = parked(cloud)
    assert json.loads(str(letter["Body"]))["detail"]["object"]["key"] == "shop/pos/sales/day=1/b.json"
    reason = letter["MessageAttributes"]["lakeline_reason"]["StringValue"]  # type: ignore[index]
    assert "b.json, column qty (bigint) has values not of its type: abc" in reason, reason
