"""Archive lines, object keys, the local archive folder, and the archive table's definitions."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
import sqlglot

from lakeline.errors import InvalidInputError
from lakeline.lineage.records.archive import (
    LocalArchiveStore,
    archive_body,
    archive_step,
    expired_object_key,
    parse_archive,
    read_root_lines,
    render_expired,
    trace_object_key,
)
from lakeline.lineage.records.archive_table import athena_ddl, glue_table_input, spark_ddl
from lakeline.lineage.records.query import DEFAULT_QUERY, QUERY_FOLDER, bind_archive_table, load_query
from lakeline.lineage.records.tree import LineageNode, build_tree

ROOT = "root-7"
AT = datetime(2026, 11, 23, 1, 0, tzinfo=UTC)
DAY = date(2026, 11, 23)


def node(node_id: str, parent_id: str, action: str, recorded_at: int = 1_700_000_000) -> LineageNode:
    return LineageNode(ROOT, node_id, parent_id, action, f"s3://b/{node_id}", recorded_at, ttl_expiry=recorded_at + 1)


def sample_tree() -> list[LineageNode]:
    return [
        node("raw", ROOT, "RAW_DATA_INPUT"),
        node("split", "raw", "GLUE_BATCH_SPLIT"),
        node("c1", "split", "CALCULATION_COMPLETE"),
        node("c2", "split", "PROFILE_COMPLETE"),
    ]


def test_rendered_lines_have_the_seed_shape_a_status_and_the_archive_step_last() -> None:
    tree = build_tree(ROOT, sample_tree())
    location = "s3://archive/dt=2026-11-23/trace-root-7.jsonl"
    body = archive_body(tree, location=location, action="DATA_COMPACTION", archived_at=AT)
    lines = [json.loads(text) for text in body.decode().splitlines()]
    assert [(line["record_id"], line["status"]) for line in lines] == [("c1", "complete"), ("c2", "unterminated")]
    first = lines[0]
    assert list(first) == ["record_id", "root_id", "status", "lineage"]
    assert [step["action_taken"] for step in first["lineage"]] == [
        "RAW_DATA_INPUT",
        "GLUE_BATCH_SPLIT",
        "CALCULATION_COMPLETE",
        "DATA_COMPACTION",
    ]
    assert first["lineage"][0] == {
        "root_id": ROOT,
        "node_id": "raw",
        "parent_id": ROOT,
        "action_taken": "RAW_DATA_INPUT",
        "storage_location": "s3://b/raw",
        "recordedAt": 1_700_000_000,
        "ttl_expiry": 1_700_000_001,
    }
    step = first["lineage"][-1]
    assert step == archive_step(
        root_id=ROOT, record_id="c1", location=location, action="DATA_COMPACTION", archived_at=AT
    )
    assert step["parent_id"] == "c1" and step["storage_location"] == location
    assert step["recordedAt"] == int(AT.timestamp())
    # Same tree, same place: the same bytes, including the archive steps' ids.
    assert archive_body(tree, location=location, action="DATA_COMPACTION", archived_at=AT) == body
    first_line = parse_archive(body)[0]
    assert first_line.nodes() == [n for n in sample_tree() if n.node_id != "c2"]


def test_object_keys_are_deterministic_and_partitioned_by_day() -> None:
    assert trace_object_key(DAY, ROOT) == "dt=2026-11-23/trace-root-7.jsonl"
    key = expired_object_key(DAY, ROOT, "node-1")
    assert key.startswith("dt=2026-11-23/expired-root-7-") and key.endswith(".jsonl")
    assert key == expired_object_key(DAY, ROOT, "node-1") != expired_object_key(DAY, ROOT, "node-2")


def test_local_store_replaces_objects_whole_and_reads_a_roots_lines_back(tmp_path: Path) -> None:
    store = LocalArchiveStore(tmp_path / "lineage-archive")
    tree = build_tree(ROOT, sample_tree())
    key = trace_object_key(DAY, ROOT)
    for _ in range(2):  # a redelivered trace writes the same object again
        store.put(key, archive_body(tree, location=store.location(key), action="DATA_COMPACTION", archived_at=AT))
    expired = {"root_id": ROOT, "node_id": "late", "parent_id": "c1", "action_taken": "X", "recordedAt": 5}
    expired_key = expired_object_key(date(2026, 11, 24), ROOT, "late")
    store.put(
        expired_key,
        render_expired(expired, location=store.location(expired_key), action="DATA_COMPACTION", archived_at=AT),
    )
    store.put(trace_object_key(DAY, "root-70"), b"")  # another root whose id starts the same
    assert store.partitions() == ["dt=2026-11-23/", "dt=2026-11-24/"]
    assert not [p for p in (tmp_path / "lineage-archive").rglob(".*")]
    lines = read_root_lines(store, ROOT)
    assert [(line.record_id, line.status) for line in lines] == [
        ("c1", "complete"),
        ("c2", "unterminated"),
        ("late", "expired"),
    ]
    assert [line.record_id for line in read_root_lines(store, ROOT, date(2026, 11, 24))] == ["late"]
    with pytest.raises(InvalidInputError, match="leaves the archive folder"):
        store.put("../outside.jsonl", b"{}")


def test_parse_archive_names_the_bad_line() -> None:
    with pytest.raises(InvalidInputError, match=r"x\.jsonl line 2 is not an archive line"):
        parse_archive(b'{"record_id":"a","root_id":"r","lineage":[]}\nnot json\n', where="x.jsonl")


def test_the_ddl_file_is_the_rendered_definition() -> None:
    text = (QUERY_FOLDER / "create_archive_table.sql").read_text()
    body = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("--"))
    assert body == athena_ddl("lineage", "lineage_archive", "s3://lineage-archive-bucket/")
    sqlglot.parse_one(body, read="athena")  # valid Athena DDL as far as sqlglot can tell


def test_glue_definition_projects_dt_partitions_without_a_crawler() -> None:
    table = glue_table_input("lineage_archive", "s3://archive-bucket/lineage")
    parameters = table["Parameters"]
    assert parameters["projection.enabled"] == "true"
    assert parameters["projection.dt.type"] == "date"
    assert parameters["storage.location.template"] == "s3://archive-bucket/lineage/dt=${dt}/"
    assert table["PartitionKeys"] == [{"Name": "dt", "Type": "string"}]
    assert table["StorageDescriptor"]["Location"] == "s3://archive-bucket/lineage/"
    assert "recordedAt:bigint" in spark_ddl("db", "t", "file:///tmp/archive")


def test_the_query_is_rebound_to_another_table() -> None:
    sql = load_query(DEFAULT_QUERY)
    assert bind_archive_table(sql, "lineage", "lineage_archive") == sql
    rebound = bind_archive_table(sql, "audit", "archive_v2")
    assert 'FROM "audit"."archive_v2" CROSS JOIN' in rebound and 'FROM "lineage"' not in rebound
    assert "UNNEST" in rebound
    with pytest.raises(InvalidInputError):
        bind_archive_table(sql, "Audit; DROP", "t")


def test_records_held_in_memory_are_traced_into_a_local_archive(tmp_path: Path) -> None:
    from lakeline.lineage.records.compact import compact_day
    from lakeline.lineage.records.model import build_records
    from lakeline.lineage.records.trace import trace_records

    [raw] = build_records(
        {"root_id": ROOT, "parent_id": ROOT, "action_taken": "RAW_DATA_INPUT", "storage_location": "s3://r/f"}, now=AT
    )
    done = build_records(
        {"root_id": ROOT, "parent_id": raw.node_id, "action_taken": "STAGE_A_COMPLETE", "storage_location": "s3://s/p"},
        now=AT,
    )
    store = LocalArchiveStore(tmp_path / "lineage-archive")
    result = trace_records(ROOT, [raw, *done], store, DAY, archived_at=AT)
    assert (result.nodes, result.statuses) == (2, {"complete": 1})
    assert result.key == f"dt=2026-11-23/trace-root-7-{int(AT.timestamp() * 1000):013d}.jsonl"
    assert read_root_lines(store, ROOT) == []  # staged, not archived yet
    compact_day(store, DAY)
    [line] = read_root_lines(store, ROOT)
    assert [node.action_taken for node in line.nodes()] == ["RAW_DATA_INPUT", "STAGE_A_COMPLETE"]
