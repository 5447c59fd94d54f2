"""Lineage requests into standard records: shapes, stamps, deterministic node ids, clear errors."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakeline.aws.sqs import MAX_BATCH_BYTES, MAX_BATCH_ENTRIES, message_batches
from lakeline.errors import InvalidInputError
from lakeline.lineage.records.model import (
    NODE_NAMESPACE,
    LineageRecord,
    build_records,
    build_requests_records,
    deterministic_node_id,
    parse_record,
    uuid5_text,
)

NOW = datetime(2026, 11, 22, 13, 30, 5, tzinfo=UTC)
STEP = {"root_id": "run-20260122", "parent_id": "run-20260122", "action_taken": "RAW_DATA_INPUT"}


def test_flat_request_gives_one_record_with_the_seed_fields_and_stamps() -> None:
    [record] = build_records({**STEP, "storage_location": "s3://raw/a/b/c.csv"}, now=NOW)
    message = record.to_message()
    assert message == {
        "root_id": "run-20260122",
        "node_id": deterministic_node_id("run-20260122", "run-20260122", "RAW_DATA_INPUT", "s3://raw/a/b/c.csv"),
        "parent_id": "run-20260122",
        "action_taken": "RAW_DATA_INPUT",
        "storage_location": "s3://raw/a/b/c.csv",
        "recordedAt": int(NOW.timestamp()),
        "ttl_expiry": int(NOW.timestamp()) + 24 * 3600,
    }
    assert parse_record(json.dumps(message)) == record


def test_single_record_and_batched_records_shapes() -> None:
    [single] = build_records({**STEP, "record": {"storage_location": "s3://b/k", "node_id": "given-1"}}, now=NOW)
    assert single.node_id == "given-1"
    batch = build_records(
        {
            **STEP,
            "records": [{"storage_location": "s3://b/k1"}, {"storage_location": "s3://b/k2", "dataset": "db.t"}],
            "dataset": "db.default",
            "run_id": "3F2504E0-4F89-11D3-9A0C-0305E82C3301",
            "job_name": "lakeline/stage_a",
        },
        now=NOW,
        ttl=timedelta(hours=6),
    )
    assert [r.storage_location for r in batch] == ["s3://b/k1", "s3://b/k2"]
    assert [r.dataset for r in batch] == ["db.default", "db.t"]
    assert {r.run_id for r in batch} == {"3f2504e0-4f89-11d3-9a0c-0305e82c3301"}
    assert all(r.ttl_expiry - r.recorded_at == 6 * 3600 for r in batch)
    assert len({r.node_id for r in batch}) == 2


def test_node_ids_are_deterministic_per_step_and_output() -> None:
    request = {**STEP, "records": [{"storage_location": "s3://b/k1"}, {"storage_location": "s3://b/k2"}]}
    first = build_records(request, now=NOW)
    again = build_records(request, now=NOW + timedelta(minutes=5))
    assert [r.node_id for r in first] == [r.node_id for r in again]
    other_action = build_records({**request, "action_taken": "PROFILE_COMPLETE"}, now=NOW)
    other_parent = build_records({**request, "parent_id": first[0].node_id}, now=NOW)
    ids = {r.node_id for r in first} | {r.node_id for r in other_action} | {r.node_id for r in other_parent}
    assert len(ids) == 6


ONE = {**STEP, "storage_location": "s3://b/k"}
BAD_REQUESTS = [
    ({**STEP}, "give exactly one of storage_location"),
    ({**ONE, "records": [{"storage_location": "s3://b/j"}]}, "got storage_location, records"),
    ({**STEP, "records": []}, "records must hold at least one record"),
    ({**ONE, "root_id": "_roots"}, "root_id: '_roots' is not a valid lineage id"),
    ({**ONE, "parent_id": "a b"}, "parent_id: 'a b' is not a valid lineage id"),
    ({**ONE, "action_taken": "raw data"}, "action_taken: 'raw data' is not a valid action"),
    ({**STEP, "records": [{"storage_location": "s3://b/k"}, {"storage_location": "b"}]}, "records[1].storage_location"),
    ({**ONE, "run_id": "nope"}, "run_id: 'nope' is not an OpenLineage run id"),
    ({**ONE, "job_name": "no-namespace"}, "job_name"),
    ({**ONE, "colour": "red"}, "colour: unknown field"),
    ({**STEP, "record": {"storage_location": "s3://b/k"}, "node_id": "n1"}, "node_id at the top level goes with"),
    ({**ONE, "parent_id": "n0", "node_id": "run-20260122"}, "node_id 'run-20260122' equals root_id"),
    ({**STEP, "records": [{"storage_location": "s3://b/k"}] * 2}, "records[1] repeats node"),
]


@pytest.mark.parametrize(("request_data", "expected"), BAD_REQUESTS)
def test_bad_requests_are_refused_naming_the_field(request_data: dict[str, object], expected: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        build_records(request_data, now=NOW)
    assert expected in str(caught.value)


def test_a_bad_request_among_several_is_named_by_position() -> None:
    good = {**STEP, "storage_location": "s3://b/k"}
    with pytest.raises(InvalidInputError, match=r"^request 1: invalid lineage request: storage_location"):
        build_requests_records([good, {**STEP, "storage_location": "not a uri"}], now=NOW)


@given(st.text(max_size=50))
def test_uuid5_text_is_uuid5(name: str) -> None:
    assert uuid5_text(NODE_NAMESPACE, name) == str(uuid.uuid5(NODE_NAMESPACE, name))


def test_naive_time_and_tiny_ttl_are_refused() -> None:
    good = {**STEP, "storage_location": "s3://b/k"}
    with pytest.raises(InvalidInputError, match="timezone-aware"):
        build_records(good, now=datetime(2026, 1, 1))
    with pytest.raises(InvalidInputError, match="at least one second"):
        build_records(good, now=NOW, ttl=timedelta(0))


def test_record_refuses_a_node_that_is_its_own_parent() -> None:
    data = {
        **STEP,
        "node_id": "n1",
        "parent_id": "n1",
        "storage_location": "s3://b/k",
        "recordedAt": 1,
        "ttl_expiry": 2,
    }
    with pytest.raises(InvalidInputError, match="cannot be its own parent"):
        parse_record(data)
    assert LineageRecord.model_validate({**data, "parent_id": "run-20260122"}).node_id == "n1"


def test_message_batches_respect_entry_count_and_bytes() -> None:
    small = ["x" * 100] * 25
    assert [len(batch) for batch in message_batches(small)] == [10, 10, 5]
    big = ["y" * 100_000] * 5  # three of them would pass 256 KiB
    batches = list(message_batches(big))
    assert [len(batch) for batch in batches] == [2, 2, 1]
    assert all(sum(len(big[i]) for i in batch) <= MAX_BATCH_BYTES for batch in batches)
    assert all(len(batch) <= MAX_BATCH_ENTRIES for batch in message_batches(small))
    with pytest.raises(InvalidInputError, match="at most 262144 bytes"):
        list(message_batches(["z" * (MAX_BATCH_BYTES + 1)]))
