"""A burst of arrivals into one stage A partition, driven through the real router, planning and commit code on
moto, every run taken to its end as the deployed state machine ends it (commit, then the lease's hand-over,
whose follow-up message the router plans and starts), until nothing waits.

What moto cannot do is the SQL: its Athena returns canned results, so each run's prefix stays empty. Everything
the partition's state and the state machine inputs hold is the real code's.

Run as a script it prints the largest state machine input of a burst of 2,000 arrivals (realistic 70-character
keys, a 63-character bucket name): ``python tests/scale/burst.py [arrivals]``. It imports only the project's
code and ``harness``, so the same script measures another checkout: ``PYTHONPATH=<checkout> python burst.py``.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

from harness.faults import REGION, LambdaSqsSource, send_bodies, stage_a_cloud
from harness.raw_objects import put_raw_object
from lakeline.commits import Lease, PartitionCommits
from lakeline.commits.slots import RunSlots
from lakeline.partitions import LeasedRunEnd, commit_write, run_location
from lakeline.storage import S3ObjectStore
from stage_a.arrivals import Arrival
from stage_a.plan import StageAPlan, arrival_id

try:
    from stage_a.arrivals import pending_arrival
except ImportError:  # a checkout from before #39's batches, measured by the same script: entries were JSON objects
    pending_arrival = Arrival.model_validate_json

LONG_BUCKET = "lakeline-raw-landing-zone-123456789012-eu-central-1-production"  # 63 characters, S3's longest
PARTITION = "eng/mysql/customers/date=20220120/"
STATE_TABLE = "pipeline-state"
ROUTER_BATCH = 10
SEND_WAVE = 100  # moto's SQS costs O(queue depth) per message: the burst is sent and drained in waves


def burst_key(index: int) -> str:
    """A 70-character raw key in the burst's partition (an export tool's naming: a part number and a run id)."""
    name = f"part-{index:05d}-8f14e45f-ceea-{index:07x}.csv"
    key = PARTITION + name
    assert len(key) == 70, key
    return key


def sequencer(index: int) -> str:
    return f"{index + 1:018X}"


def arrival_body(index: int, *, bucket: str = LONG_BUCKET) -> str:
    """The EventBridge "Object Created" event S3 sends for the burst's ``index``-th file."""
    key = burst_key(index)
    return json.dumps(
        {
            "version": "0",
            "id": f"event-{index}",
            "detail-type": "Object Created",
            "source": "aws.s3",
            "account": "123456789012",
            "time": f"2022-01-20T10:{index // 60 % 60:02d}:{index % 60:02d}Z",
            "region": REGION,
            "resources": [f"arn:aws:s3:::{bucket}"],
            "detail": {
                "version": "0",
                "bucket": {"name": bucket},
                "object": {"key": key, "size": 1024, "etag": "0" * 32, "sequencer": sequencer(index)},
                "reason": "PutObject",
            },
        }
    )


def plan_suffix(plan: StageAPlan) -> str:
    """The end of the execution name of ``plan``'s run (``stage_a.start.execution_name``: fixed by its token)."""
    import hashlib

    return hashlib.sha256(plan.run_token.encode()).hexdigest()[:40]


def arrival_of(index: int) -> Arrival:
    """The arrival the router parses from ``arrival_body(index)``."""
    from stage_a.arrivals import parse_arrivals

    (arrival,) = parse_arrivals(json.loads(arrival_body(index)))
    return arrival


def expected_ids(arrivals: int) -> set[str]:
    return {arrival_id(burst_key(index), sequencer(index)) for index in range(arrivals)}


@dataclass
class Run:
    """One execution: its input's size and what its plan takes."""

    name: str
    input_bytes: int
    mode: str
    taken: tuple[str, ...]  # ids of the arrivals the run's lease takes (its batch)
    applied: tuple[str, ...]
    largest_statement: int = 0  # bytes of its plan's longest SQL statement
    committed: bool = False  # its commit went through: its applied ids are in the partition's published version


@dataclass
class Burst:
    """The partition's cloud on moto, and every run that was started in it, in order."""

    monkeypatch: pytest.MonkeyPatch
    runs: list[Run] = field(default_factory=list)
    cloud: Any = None
    commits: PartitionCommits | None = None
    store: S3ObjectStore | None = None
    router: LambdaSqsSource | None = None
    _seen: set[str] = field(default_factory=set)
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # each execution's plan, as its input holds it

    @property
    def largest_input(self) -> int:
        return max((run.input_bytes for run in self.runs), default=0)

    def send(self, indexes: range | list[int]) -> None:
        """S3 puts the files and sends their events onto queue A, which the router drains (in waves)."""
        items = list(indexes)
        for start in range(0, len(items), SEND_WAVE):
            wave = items[start : start + SEND_WAVE]
            for index in wave:
                put_raw_object(burst_key(index), LONG_BUCKET)
            send_bodies(self.cloud.sqs, self.cloud.queue_url, [arrival_body(index) for index in wave])
            self.drain()

    def wait(self, indexes: range | list[int], *, per_call: int = 100) -> list[int]:
        """Record arrivals as waiting behind the run that holds the partition, with the call the router makes
        for each (``PartitionCommits.begin``), many at a time: the router's door check of thousands of files
        on moto would take minutes and is not what these tests measure. Returns those the partition's item had
        no room for (``PartitionFull``): the router sends them back to their queue, and they are offered again
        (``run_to_the_end``)."""
        from lakeline.commits import PartitionFull
        from lambdas.stage_a_router import handler as router
        from stage_a.arrivals import pending_entry
        from stage_a.keys import parse_raw_key
        from stage_a.start import arrival_run_token, partition_commit_key, stage_partition_root

        settings = router.runtime().settings
        items = list(indexes)
        arrivals = [arrival_of(index) for index in items]
        raw = parse_raw_key(arrivals[0].key)
        key, root = partition_commit_key(raw, settings), stage_partition_root(raw, settings)
        assert self.commits is not None
        for start in range(0, len(arrivals), per_call):
            chunk = arrivals[start : start + per_call]
            token = arrival_run_token(chunk[0])
            try:
                entries = [pending_entry(a) for a in chunk]
                lease = self.commits.begin(key, token, run_location(root, token), root, entries)
            except PartitionFull:
                # One at a time, as the router records them, until one is refused: the rest would be too.
                for offset, arrival in enumerate(chunk):
                    try:
                        lease = self.commits.begin(
                            key, token, run_location(root, token), root, [pending_entry(arrival)]
                        )
                    except PartitionFull:
                        return items[start + offset :]
                    assert lease is None, "a run holds the partition: the arrivals wait"
                continue
            assert lease is None, "a run holds the partition: the arrivals wait"
        return []

    def drain(self) -> None:
        from lambdas.stage_a_router import handler as router

        assert self.router is not None
        report = self.router.run_until_empty(router.handler, max_invocations=10_000)
        assert report.reported_failures == 0 and report.errors == 0, report

    def started(self) -> list[dict[str, Any]]:
        """The executions started since the last call, oldest first."""
        new = [e for e in self.cloud.executions() if e["executionArn"] not in self._seen]
        new.sort(key=lambda execution: execution["startDate"])
        self._seen.update(execution["executionArn"] for execution in new)
        return new

    def take(self, execution: dict[str, Any]) -> tuple[StageAPlan, Run]:
        """Read an execution's input as Step Functions holds it, and note what its plan takes (read from its batch
        object, as the functions that end the run read it)."""
        text = self.cloud.sfn.describe_execution(executionArn=execution["executionArn"])["input"]
        self.inputs[execution["name"]] = json.loads(text)["plan"]
        plan = StageAPlan.from_dict(self.inputs[execution["name"]])
        if hasattr(plan, "with_batch"):  # a checkout from before #39's batch objects carries the batch inline
            plan = plan.with_batch(self.store)
        assert plan.lease is not None
        taken = tuple(
            sorted(
                arrival_id(parsed.key, parsed.sequencer)
                for parsed in (pending_arrival(entry) for entry in Lease.from_dict(plan.lease).pending)
            )
        )
        statement = max((len(sql.encode()) for sql in plan.statements), default=0)
        run = Run(execution["name"], len(text.encode()), plan.mode, taken, plan.applied, statement)
        self.runs.append(run)
        return plan, run

    def end(
        self,
        plan: StageAPlan,
        *,
        commit: bool = True,
        hand_over: bool = True,
        meanwhile: Callable[[], None] = lambda: None,
    ) -> None:
        """What the state machine does after its SQL: commit the run's prefix, then end its lease, which queues
        the follow-up run on queue A when arrivals wait. ``commit=False``: the run died before its commit;
        ``hand_over=False``: before its end (its lease stays held until it expires). ``meanwhile``: what happens
        between the commit and the hand-over (the catalog swap and the post-update take seconds)."""
        assert self.commits is not None and self.store is not None and plan.lease is not None
        run = next(run for run in self.runs if run.name.endswith(plan_suffix(plan)))
        if commit and plan.writes:
            # As the commit task does, from the input as the state machine passes it on (its batch named, not listed).
            try:
                from lambdas.partition_commit.handler import LeasedPlan, commit_plan

                commit_plan(LeasedPlan.model_validate(self.inputs[run.name]), self.commits, self.store)
            except ImportError:  # a checkout from before #39's batch objects
                lease = Lease.from_dict(plan.lease)
                commit_write(self.commits, lease, self.store, carry_from=plan.carry_from, applied=plan.applied)
            run.committed = True
        meanwhile()
        if hand_over:
            # As the stage's post-update function ends it: its slot given back (lakeline.commits.slots).
            slots = RunSlots(self.commits.client, self.commits.table_name, "a")
            ended = LeasedRunEnd(self.commits, self.store, self.cloud.sqs, self.cloud.queue_url, slots=slots)
            ended.after_publish(plan.lease, wrote=plan.writes, root=plan.stage_partition_root)

    def expire_lease(self) -> None:
        """The partition's lease expires (its run died): the next arrival or sweep may take it."""
        assert self.commits is not None
        key = self.commits.partitions()[0].key
        self.commits.client.update_item(
            TableName=self.commits.table_name,
            Key={self.commits.key_attribute: {"S": key}},
            UpdateExpression="SET lease_expires = :past",
            ExpressionAttributeValues={":past": {"N": "0"}},
        )

    def run_to_the_end(self, max_runs: int = 1_000, *, sent_back: list[int] | None = None) -> None:
        """Each started execution ends (commit, hand-over); the router starts the follow-ups; until none is left.
        ``sent_back``: arrivals ``wait`` had no room for, offered again while a run holds the partition, as their
        queue delivers them again after their delay: while the run works, and between its commit (which makes room
        in the partition's item) and its hand-over, as queue A's backlog is delivered meanwhile."""
        left = list(sent_back or [])

        def offer() -> None:
            nonlocal left
            if left:
                left = self.wait(left)

        for _ in range(max_runs):
            started = self.started()
            if not started:
                assert not left, f"{len(left)} arrivals still wait in their queue with no run to take them"
                return
            offer()
            for execution in started:
                plan, _ = self.take(execution)
                self.end(plan, meanwhile=offer)
            self.drain()
        raise AssertionError(f"runs still starting after {max_runs}")

    def state(self) -> Any:
        assert self.commits is not None
        return self.commits.read(self.commits.partitions()[0].key)


@contextmanager
def burst_cloud(monkeypatch: pytest.MonkeyPatch) -> Iterator[Burst]:
    """Queue A, the router and the pipeline-state table on moto, raw files in a bucket with a long name."""
    from lambdas.stage_a_router import handler as router

    with stage_a_cloud(monkeypatch, tables=("customers",)) as cloud:
        monkeypatch.setenv("RAW_BUCKET", LONG_BUCKET)
        # Its runs end in milliseconds, so the arrivals are always "still coming" (recorded within 2 s): the
        # follow-ups would wait their windows out of sight of the drain. The windows have tests of their own.
        monkeypatch.setenv("FOLLOW_UP_WINDOW_SECONDS", "0")
        router.runtime.cache_clear()
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="stage-bucket")
        burst = Burst(monkeypatch, cloud=cloud)
        burst.store = S3ObjectStore(s3)
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        burst.commits = PartitionCommits(dynamodb, STATE_TABLE, lists=burst.store)
        burst.router = LambdaSqsSource(cloud.sqs, cloud.queue_url, "stage-a-router", batch_size=ROUTER_BATCH)
        yield burst


def measure(arrivals: int) -> dict[str, Any]:
    """A burst of ``arrivals`` into one partition while its first run is in flight, run to the end."""
    monkeypatch = pytest.MonkeyPatch()
    started = time.perf_counter()
    try:
        with burst_cloud(monkeypatch) as burst:
            burst.send(range(arrivals))
            burst.run_to_the_end()
            applied = Counter(identity for run in burst.runs if run.committed for identity in run.applied)
            state = burst.state()
            return {
                "arrivals": arrivals,
                "executions": len(burst.runs),
                "largest_input_bytes": burst.largest_input,
                "largest_statement_bytes": max(run.largest_statement for run in burst.runs),
                "largest_batch": max(len(run.taken) for run in burst.runs),
                "applied_once": set(applied) == expected_ids(arrivals) and max(applied.values()) == 1,
                "left_waiting": len(state.pending),
                "seconds": round(time.perf_counter() - started, 1),
            }
    finally:
        monkeypatch.undo()


if __name__ == "__main__":
    import os

    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    }.items():
        os.environ.setdefault(name, value)
    print(json.dumps(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 2_000)))
