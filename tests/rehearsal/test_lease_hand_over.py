"""A trailing window planned before one of its source days is published, on the local deployment's
DynamoDB: the day's message comes while the window's run ends its lease, and must not be left behind.

Before (#36): moto checked the run's release (``lease_owner = :owner AND attribute_not_exists(pending)``)
and applied it with the message's ``ADD pending`` in between; the message then waited with no run to take
it, and the window kept one day where the files hold two. DynamoDB applies a conditional write atomically,
and so must the local deployment (``lakeline.runtimes.deployed.local_aws.moto_fixes``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from lakeline.commits import Lease, PartitionCommits, finish_run
from lakeline.partitions import new_run_token, run_location
from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.storage import SchemeObjectStore
from stage_b.messages import SourceArrival, StageBMessage
from stage_b.start import message_commit_key, message_run_token
from tests.rehearsal.support import output

ROOT = "s3://analytics/reports/ops_3d/day=2024-05-03/"


def window_message(source_day: str) -> StageBMessage:
    """The message a published day of ``daily_ops`` sends to the window ending on 2024-05-03."""
    return StageBMessage(
        target_dataset="air_reports_dev.ops_3d",
        partition={"day": "2024-05-03"},
        trigger=SourceArrival(table="air_reports_dev.daily_ops", partition={"day": source_day}, run=new_run_token()),
        usage="overwrite",
    )


@pytest.fixture
def release_held_open() -> Iterator[tuple[threading.Event, threading.Event]]:
    """While entered, moto's check of a lease release that passed waits (up to 2 s) before the release is
    applied, for ``queued`` to be set: the widest window a concurrent request could fall into. ``checked``
    is set when the check has passed."""
    import moto.dynamodb.models as models

    checked, queued = threading.Event(), threading.Event()
    original = models.create_condition_expression_parser

    def parser(expression: str | None, names: Any, values: Any) -> Any:
        made = original(expression, names, values)
        if "attribute_not_exists(pending)" not in (expression or ""):
            return made
        parse = made.parse

        def parse_held() -> Any:
            condition = parse()
            evaluate = condition.expr

            def held(item: Any) -> bool:
                passed = bool(evaluate(item))
                if passed:
                    checked.set()
                    queued.wait(2)
                return passed

            condition.expr = held
            return condition

        made.parse = parse_held
        return made

    models.create_condition_expression_parser = parser
    try:
        yield checked, queued
    finally:
        models.create_condition_expression_parser = original


def test_a_source_day_published_while_its_window_run_ends_is_taken_by_a_run(
    deployment: Deployment, release_held_open: tuple[threading.Event, threading.Event]
) -> None:
    checked, queued = release_held_open
    s3 = deployment.client("s3")
    if "analytics" not in {bucket["Name"] for bucket in s3.list_buckets()["Buckets"]}:
        s3.create_bucket(Bucket="analytics")  # ROOT's: the commit writes the version's applied list there
    commits = PartitionCommits(
        deployment.client("dynamodb"),
        output(deployment, "PipelineStateTable"),
        lists=SchemeObjectStore(s3),  # where the versions' applied lists are written
    )
    first, second = window_message("2024-05-02"), window_message("2024-05-03")
    key = message_commit_key(first)
    token = message_run_token(first)
    # The window is planned and built from 2024-05-02 alone: 2024-05-03 is not published yet.
    lease = commits.begin(key, token, run_location(ROOT, token), ROOT, [first.model_dump_json()])
    assert lease is not None
    commits.commit(lease, publish=True, files=1, applied=[first.deduplication_id()])

    # Its run ends its lease while 2024-05-03's message queues behind that lease.
    ended: list[Lease | None] = []
    ending = threading.Thread(target=lambda: ended.append(finish_run(commits, lease, new_run_token, ROOT).follow_up))
    ending.start()
    assert checked.wait(60)
    second_token = message_run_token(second)
    taken = commits.begin(key, second_token, run_location(ROOT, second_token), ROOT, [second.model_dump_json()])
    queued.set()
    ending.join(60)

    # Exactly one run takes the message: the one it started, or the ended run's follow-up.
    (follow_up,) = ended
    takers = [lease for lease in (taken, follow_up) if lease is not None]
    assert [second.model_dump_json() in lease.pending for lease in takers] == [True]
    state = commits.read(key)
    assert state.lease_owner == takers[0].owner and state.pending == {second.model_dump_json()}
