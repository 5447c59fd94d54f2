"""The local event flow checks each arrival at the door as the deployed router does: a file that breaks
its table's contract is parked in the DLQ and the quarantine folder with the reason, and never holds up
the good files of its partition; ``schema_evolution: add-columns`` grows the raw and stage tables."""

from __future__ import annotations

import gzip
import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeline.engines.spark import SparkEngine
from lakeline.project.workspace import Workspace
from lakeline.runtimes.embedded.cloud import LocalCloud
from lakeline.runtimes.embedded.event_flow import EventFlow
from lakeline.settings import SchemaEvolution, TableSettings

_environments = itertools.count()


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    started = LocalCloud.start()
    try:
        yield started
    finally:
        started.stop()


def flow(spark_engine: SparkEngine, cloud: LocalCloud, root: Path, evolution: SchemaEvolution) -> EventFlow:
    workspace = Workspace.at(root)
    settings = workspace.settings(
        environment=f"door{next(_environments)}", default_table=TableSettings(schema_evolution=evolution)
    )
    return EventFlow(cloud, spark_engine, workspace, settings, root / "queries")


def arrive(events: EventFlow, key: str, body: str) -> None:
    path = events.workspace.raw_dir / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    events.arrive(key)
    events.run_until_idle()


def rows(spark_engine: SparkEngine, events: EventFlow) -> list[tuple[object, ...]]:
    table = f"{events.settings.stage_database('shop', 'pos')}.sales"
    return sorted(spark_engine.execute(f"SELECT * FROM {table}").rows, key=str)


def parked(cloud: LocalCloud) -> list[dict[str, object]]:
    url = cloud.queue_urls["queue-a-dlq"]
    messages = cloud.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
    for message in messages.get("Messages", []):
        cloud.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return list(messages.get("Messages", []))


def test_a_refused_file_is_parked_with_its_reason_and_the_next_good_file_of_its_partition_loads(
    spark_engine: SparkEngine, cloud: LocalCloud, tmp_path: Path
) -> None:
    events = flow(spark_engine, cloud, tmp_path, "reject")
    parked(cloud)
    arrive(events, "shop/pos/sales/day=1/a.csv", "store,amount\nn,1.5\n")
    arrive(events, "shop/pos/sales/day=1/b.csv", "store,amount,clerk\ns,2,bob\n")
    arrive(events, "shop/pos/sales/day=1/c.csv", "store,amount\ne,3\n")

    assert rows(spark_engine, events) == [("e", 3.0, "1"), ("n", 1.5, "1")]
    (refused,) = events.report.quarantined
    assert refused.startswith("shop/pos/sales/day=1/b.csv: ")
    assert "header has column clerk not in table" in refused
    (letter,) = parked(cloud)
    assert json.loads(str(letter["Body"]))["detail"]["object"]["key"] == "shop/pos/sales/day=1/b.csv"
    reason = letter["MessageAttributes"]["lakeline_reason"]["StringValue"]  # type: ignore[index]
    assert "header has column clerk" in reason
    record = json.loads((tmp_path / "quarantine" / "shop/pos/sales/day=1/b.csv.json").read_text())
    assert "header has column clerk" in record["reason"]


def test_add_columns_grows_the_raw_and_stage_tables_and_loads_the_new_column(
    spark_engine: SparkEngine, cloud: LocalCloud, tmp_path: Path
) -> None:
    events = flow(spark_engine, cloud, tmp_path, "add-columns")
    arrive(events, "shop/pos/sales/day=1/a.csv", "store,amount\nn,1.5\n")
    arrive(events, "shop/pos/sales/day=2/b.csv", "store,amount,clerk\ns,2,bob\n")
    arrive(events, "shop/pos/sales/day=2/c.csv", "store,amount,clerk\ne,3,\n")

    assert events.report.quarantined == []
    assert rows(spark_engine, events) == [("e", 3.0, None, "2"), ("n", 1.5, None, "1"), ("s", 2.0, "bob", "2")]


def test_rfc_4180_fields_and_the_declared_encoding_load_as_written(
    spark_engine: SparkEngine, cloud: LocalCloud, tmp_path: Path
) -> None:
    workspace = Workspace.at(tmp_path)
    settings = workspace.settings(
        environment=f"door{next(_environments)}", default_table=TableSettings(encoding="latin-1")
    )
    events = EventFlow(cloud, spark_engine, workspace, settings, tmp_path / "queries")
    key = "shop/pos/sales/day=1/a.csv"
    path = workspace.raw_dir / key
    path.parent.mkdir(parents=True)
    path.write_bytes('store,amount\r\n"Smith, ""Al""\nJr.",1.5\r\ncafé,2\r\n'.encode("latin-1"))
    events.arrive(key)
    events.run_until_idle()
    assert (events.report.quarantined, events.report.failures) == ([], [])
    assert rows(spark_engine, events) == [('Smith, "Al"\nJr.', 1.5, "1"), ("café", 2.0, "1")]


def test_csv_columns_in_another_order_are_read_by_name_exactly(
    spark_engine: SparkEngine, cloud: LocalCloud, tmp_path: Path
) -> None:
    workspace = Workspace.at(tmp_path)
    settings = workspace.settings(
        environment=f"door{next(_environments)}",
        default_table=TableSettings(encoding="latin-1", schema_evolution="add-columns"),
    )
    events = EventFlow(cloud, spark_engine, workspace, settings, tmp_path / "queries")
    arrive(events, "shop/pos/sales/day=1/a.csv", "store,amount\nn,1.5\n")
    key = "shop/pos/sales/day=1/b.csv"
    moved = 'clerk,amount,store\r\nbob,2,"Smith, ""Al""\nJr."\r\nzoë,3,café\r\n'.encode("latin-1")
    (workspace.raw_dir / key).write_bytes(moved)
    events.arrive(key)
    events.run_until_idle()

    assert (events.report.quarantined, events.report.failures) == ([], [])
    assert events.report.read_by_name == [f"{key} as shop/pos/sales/day=1/b.lakeline-by-name.csv"]
    assert rows(spark_engine, events) == [
        ('Smith, "Al"\nJr.', 2.0, "bob", "1"),
        ("café", 3.0, "zoë", "1"),
        ("n", 1.5, None, "1"),
    ]
    # The original is never loaded: arriving again (a rerun) changes nothing.
    events.arrive(key)
    events.run_until_idle()
    assert len(rows(spark_engine, events)) == 3


def test_nested_json_is_checked_to_the_leaf_before_spark_would_read_it_as_null(
    spark_engine: SparkEngine, cloud: LocalCloud, tmp_path: Path
) -> None:
    events = flow(spark_engine, cloud, tmp_path, "reject")
    good = '{"id": 1, "ship": {"city": "Oslo", "zip": 150}, "lines": [{"sku": "a", "qty": 2}]}\n'
    arrive(events, "shop/web/orders/day=1/a.json", good)
    arrive(events, "shop/web/orders/day=1/b.json", '{"id": 2, "ship": {"city": "Rome", "zip": "00100"}}\n')
    arrive(events, "shop/web/orders/day=1/c.json", '{"id": 3, "lines": [{"sku": "b", "qty": 1, "price": 9}]}\n')
    arrive(events, "shop/web/orders/day=1/d.json", '{"id": 4, "lines": [{"sku": "c"}]}\n')

    reasons = "\n".join(events.report.quarantined)
    assert len(events.report.quarantined) == 2, reasons
    assert "b.json: line 1, field ship.zip: '\"00100\"' is not bigint" in reasons
    assert "c.json: line 1, field lines[] has key 'price'" in reasons
    table = f"{events.settings.stage_database('shop', 'web')}.orders"
    loaded = spark_engine.execute(f"SELECT id, ship.city, lines[1].sku FROM {table} ORDER BY id").rows
    assert [tuple(row) for row in loaded] == [(1, "Oslo", "a"), (4, None, "c")]


def test_json_keys_of_another_case_load_their_values_as_athena_reads_them(
    spark_engine: SparkEngine, cloud: LocalCloud, tmp_path: Path
) -> None:
    """Athena's JSON SerDes match keys to columns and struct fields ignoring case; Spark's reader would
    read NULL for ``Store``: the file is read through a copy spelled as the table (#36), first file of
    its table or not, gzip-compressed or not; two keys equal ignoring case refuse the file."""
    events = flow(spark_engine, cloud, tmp_path, "add-columns")
    first = '{"Store": "east", "CITY": "Boston", "Ship": {"Zip": 2110, "lines": [{"SKU": "a"}]}, "tags": {"K": 1}}\n'
    arrive(events, "shop/web/stores/day=1/a.json", first)
    later = '{"store": "west", "city": "LA", "ship": {"ZIP": 90001}, "Till": "t1", "TAGS": {"k": 2}}\n'
    path = events.workspace.raw_dir / "shop/web/stores/day=1/b.json.gz"
    path.write_bytes(gzip.compress(later.encode()))
    events.arrive("shop/web/stores/day=1/b.json.gz")
    events.run_until_idle()
    arrive(events, "shop/web/stores/day=1/c.json", '{"store": "north", "Store": "south"}\n')

    reasons = "\n".join(events.report.quarantined)
    assert reasons.endswith(
        "c.json: line 1 has key 'Store' twice ('store' and 'Store'): keys are matched to "
        "columns ignoring case, as Athena's JSON SerDes match them"
    ), reasons
    assert events.report.failures == []
    assert events.report.read_by_name == [
        "shop/web/stores/day=1/a.json as shop/web/stores/day=1/a.lakeline-by-name.json",
        "shop/web/stores/day=1/b.json.gz as shop/web/stores/day=1/b.lakeline-by-name.json.gz",
    ]
    table = f"{events.settings.stage_database('shop', 'web')}.stores"
    loaded = spark_engine.execute(
        f"SELECT store, city, ship.zip, ship.lines[1].sku, tags.k, till FROM {table} ORDER BY store"
    ).rows
    assert [tuple(row) for row in loaded] == [
        ("east", "Boston", 2110, "a", 1, None),
        ("west", "LA", 90001, None, 2, "t1"),
    ]


def test_a_utf8_csv_with_a_byte_order_mark_loads_as_written(
    spark_engine: SparkEngine, cloud: LocalCloud, tmp_path: Path
) -> None:
    """Excel's "CSV UTF-8": a byte-order mark before the header, first file of the table and a later one."""
    events = flow(spark_engine, cloud, tmp_path, "reject")
    for key, body in (("day=1/a.csv", "store,amount\nnorth,1.5\n"), ("day=1/b.csv", "store,amount\ncafé,2\n")):
        path = events.workspace.raw_dir / "shop/pos/sales" / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\xef\xbb\xbf" + body.encode())
        events.arrive(f"shop/pos/sales/{key}")
        events.run_until_idle()

    assert (events.report.quarantined, events.report.failures) == ([], [])
    assert rows(spark_engine, events) == [("café", 2.0, "1"), ("north", 1.5, "1")]
