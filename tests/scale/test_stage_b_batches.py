"""The scale tier, stage B (#39): a backlog of 2,000 messages waiting on one target partition is taken in bounded
batches, each run's state machine input under a quarter of Step Functions' 256 KiB, every message exactly once.

Before the batches, one run took every waiting message: its input held each message's body and id twice, and
about 250 realistic messages passed 256 KiB (the run was refused at ``StartExecution`` every time)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest

from lakeline.commits import Lease
from lakeline.dependencies.model import parse_dependency_item
from lakeline.engines.base import Column, TableSchema
from lakeline.settings import PipelineSettings
from stage_b.messages import StageBMessage
from stage_b.plan import MAX_RUN_MESSAGES, StageBPlan, leased_messages, plan_stage_b
from tests.rehearsal.support import daily_item

QUARTER_OF_THE_QUOTA = 256 * 1024 // 4
TARGET = "retail_analytics_reporting_dev.daily_store_takings_by_region"
SOURCE = "retail_point_of_sale_transactions_dev.store_sales_lines"
SCHEMA = TableSchema(
    "retail_analytics_reporting_dev",
    "daily_store_takings_by_region",
    (Column("region", "string"), Column("takings", "double")),
    (Column("date", "string"),),
    location="s3://lakeline-analytics-123456789012-eu-central-1-production/daily_store_takings_by_region/",
)
SETTINGS = PipelineSettings(raw_root="s3://raw/", stage_root="s3://stage/", environment="dev")
SQL = f"INSERT INTO {TARGET} SELECT region, sum(amount), '$day' FROM {SOURCE} WHERE date = '$day' GROUP BY region"
OWNER = "20240301t000000000000_0123456789"


def message(index: int, usage: str = "overwrite") -> StageBMessage:
    """A realistic message: a new version of one source partition (its run token), its lineage ids and path."""
    return StageBMessage.model_validate(
        {
            "target_dataset": TARGET,
            "partition": {"date": "20240301"},
            "trigger": {
                "table": SOURCE,
                "partition": {"date": "20240301"},
                "run": f"20240301t{index:012d}_{index:010x}",
            },
            "usage": usage,
            "lineage": {"root_id": f"{index:032x}", "parent_id": f"{index + 1:032x}"},
            "path": [f"{SOURCE}/date=20240301", f"retail_point_of_sale_transactions_raw_dev.lines/date={index}"],
        }
    )


def plan(lease: Lease) -> StageBPlan:
    item = parse_dependency_item(daily_item(TARGET, "overwrite", [{"db": "x", "sql": SQL}], source=SOURCE))
    return plan_stage_b(
        leased_messages(lease)[0], item, SCHEMA, SETTINGS, lambda name: "", run_token=OWNER, lease=lease
    )


def run_to_the_end(lease: Lease) -> list[StageBPlan]:
    """Each run as the deployed state machine ends it: its commit takes the plan's batch out of ``pending`` and
    adds its ids to ``applied``; the hand-over's follow-up plans what is left."""
    plans: list[StageBPlan] = []
    while lease.pending:
        planned = plan(lease)
        plans.append(planned)
        assert planned.lease is not None
        taken = set(planned.lease["pending"])
        assert taken, "every run takes something"
        lease = replace(
            lease,
            pending=tuple(body for body in lease.pending if body not in taken),
            applied=lease.applied | set(planned.applied),
        )
    return plans


def input_bytes(planned: StageBPlan) -> int:
    return len(json.dumps({"message": planned.message, "plan": planned.to_dict()}).encode())


def backlog(count: int, usage: str = "overwrite") -> Lease:
    bodies = tuple(sorted(message(index, usage).model_dump_json() for index in range(count)))
    location = f"{SCHEMA.location}date=20240301/lakeline_run={OWNER}/"
    return Lease(f"commit#{TARGET}/date=20240301", OWNER, location, 1, None, 0, bodies, frozenset(), 1)


def test_a_backlog_of_2000_messages_is_taken_in_bounded_batches_each_exactly_once() -> None:
    plans = run_to_the_end(backlog(2_000))
    assert max(input_bytes(planned) for planned in plans) < QUARTER_OF_THE_QUOTA
    assert all(len(planned.message_ids) <= MAX_RUN_MESSAGES for planned in plans)
    taken = Counter(identity for planned in plans for identity in planned.applied)
    assert len(taken) == 2_000 and set(taken.values()) == {1}
    assert 2_000 / MAX_RUN_MESSAGES <= len(plans) <= 2 * 2_000 / MAX_RUN_MESSAGES
    assert all(planned.steps for planned in plans), "each batch rebuilds the partition"


def test_the_oldest_messages_are_taken_first() -> None:
    first, *rest = run_to_the_end(backlog(300))
    assert rest, "a backlog of 300 takes more than one run"
    oldest = {message(index).deduplication_id() for index in range(len(first.message_ids))}
    assert set(first.message_ids) == oldest


@pytest.mark.parametrize("redelivered", [0, 150, 299])
def test_messages_applied_before_are_taken_out_of_pending_and_not_applied_again(redelivered: int) -> None:
    """A message redelivered after its run applied it waits in ``pending`` again; a batch takes it out without
    applying it twice."""
    lease = backlog(300)
    applied = message(redelivered).deduplication_id()
    plans = run_to_the_end(replace(lease, applied=frozenset({applied})))
    assert applied not in {identity for planned in plans for identity in planned.applied}
    assert sum(len(planned.applied) for planned in plans) == 299
