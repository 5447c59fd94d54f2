"""Load: a burst of 1,000 arrivals through queue A and the deployed router, on moto.

Every arrival must start exactly one stage A execution (named by the arrival, so the duplicates that
S3 and SQS deliver start nothing), every hostile key must be parked in the DLQ with its reason, and
no message may be left behind. How many routers (and so how many starts per second) run at once is a
deployment setting, asserted on the synthesized template.

moto's SQS costs O(queue depth) per message, so the burst is sent in ten waves of 110 messages, each
drained before the next; the router sees the same stream of batches as in one wave.
"""

from __future__ import annotations

import json
from collections import Counter

import boto3
import pytest

from harness.faults import (
    REGION,
    STAGE_A_TABLES,
    LambdaSqsSource,
    arrival_event,
    drain_messages,
    expected_execution_name,
    reason_of,
    resources_of,
    send_bodies,
    stage_a_cloud,
    state_machine_states,
    synthesized_templates,
)
from lakeline.commits import PartitionCommits
from lakeline.commits.batch import BatchRef, read_batch
from lakeline.errors import ConfigError
from lakeline.storage import S3ObjectStore
from stacks.config import LakelineConfig
from stacks.constructs.stage import FOLLOW_UP_CONCURRENCY
from stage_a.arrivals import pending_arrival

ARRIVALS = 1_000
WAVES = 10
DUPLICATE_EVERY = 10  # every 10th arrival is delivered twice
HOSTILE_KEYS = [
    "eng/mysql/customers/date=2022';DROP TABLE x;--/f.csv",
    "eng/mysql/customers/date=20220120/../../../etc/passwd",
    "eng/mysql/Customers/date=20220120/f.csv",
    "eng/mysql/customers/date=2022%2701/f.csv",
    "eng/mysql/customers/date=2022\u00e9/f.csv",
    "eng/mysql/customers/date=20220120/f\u202e.csv",
    "eng/mysql/customers/date=20220120/" + "f" * 300 + ".csv",
    "eng/mysql/customers/date=20220120/.hidden",
    "eng/mysql/customers/date=20220120",
    "eng/mysql/customers/region=eu/f.csv",  # valid key, but the table is partitioned by date
]


def burst_key(index: int) -> str:
    table = STAGE_A_TABLES[index % len(STAGE_A_TABLES)]
    return f"eng/mysql/{table}/date=202201{index % 28 + 1:02d}/part-{index:04d}.csv"


def sequencer(index: int) -> str:
    return f"{index:018X}"


def wave_bodies(wave: int) -> list[str]:
    """The wave's new arrivals, with redeliveries of this wave's and the previous wave's arrivals
    interleaved, and one hostile key."""
    per_wave = ARRIVALS // WAVES
    first = wave * per_wave
    bodies = []
    for index in range(first, first + per_wave):
        bodies.append(json.dumps(arrival_event(burst_key(index), sequencer(index))))
        if index % DUPLICATE_EVERY == 5:
            again = index - per_wave if index - per_wave >= 0 else index
            bodies.append(json.dumps(arrival_event(burst_key(again), sequencer(again))))
    bodies.append(json.dumps(arrival_event(HOSTILE_KEYS[wave], sequencer(10_000 + wave))))
    return bodies


def test_a_burst_of_1000_arrivals_starts_one_run_per_partition_and_loses_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lambdas.stage_a_router import handler as router

    with stage_a_cloud(monkeypatch) as cloud:
        source = LambdaSqsSource(cloud.sqs, cloud.queue_url, "stage-a-router")
        sent = 0
        delivered = reported_failures = 0
        for wave in range(WAVES):
            bodies = wave_bodies(wave)
            send_bodies(cloud.sqs, cloud.queue_url, bodies)
            sent += len(bodies)
            report = source.run_until_empty(router.handler)
            delivered += report.messages
            reported_failures += report.reported_failures

        # One run per partition starts; every other arrival of a partition waits in its state for that
        # run's follow-up. Nothing is lost: each arrival is in a started run or waiting.
        executions = cloud.executions()
        names = Counter(execution["name"] for execution in executions)
        partitions = {burst_key(i).rsplit("/", 1)[0] for i in range(ARRIVALS)}
        assert len(executions) == len(partitions)
        assert max(names.values()) == 1
        taken: Counter[str] = Counter()
        store = S3ObjectStore(boto3.client("s3", region_name=REGION))
        for execution in executions:
            plan = cloud.execution_input(execution["executionArn"])["plan"]
            assert plan["raw_key"].rsplit("/", 1)[0] in partitions
            batch = read_batch(store, BatchRef(**plan["batch"]), plan["target_location"])
            taken.update(pending_arrival(entry).key for entry in batch.pending)
        commits = PartitionCommits(boto3.client("dynamodb", region_name=REGION), "pipeline-state")
        waiting: Counter[str] = Counter()
        for state in commits.partitions():
            waiting.update(pending_arrival(entry).key for entry in state.pending)
            assert state.taken is not None, "its run's batch left ``pending`` when it was planned, noted in the item"
        # A started run's arrivals left ``pending`` for its batch object: each arrival is in one of them. A
        # redelivery is the same arrival, recorded once while it waits; one delivered again after its run took it
        # waits once more, and the follow-up finds it applied by then (``tests/scale``: no row doubled).
        assert set(taken) | set(waiting) == {burst_key(i) for i in range(ARRIVALS)}
        assert max(taken.values()) == 1 and max(waiting.values()) == 1
        redelivered = {burst_key(i) for i in range(ARRIVALS) if i % DUPLICATE_EVERY == 5}
        redelivered |= {burst_key(i - ARRIVALS // WAVES) for i in range(ARRIVALS) if i % DUPLICATE_EVERY == 5}
        assert set(taken) & set(waiting) <= redelivered
        sample = expected_execution_name(burst_key(7), sequencer(7))
        started_by_7 = [e for e in executions if e["name"] == sample]
        assert started_by_7, "the first arrival of its partition started the partition's run"
        assert cloud.execution_input(started_by_7[0]["executionArn"])["plan"]["raw_key"] == burst_key(7)

        dead = drain_messages(cloud.sqs, cloud.dead_letter_url)
        assert sorted(json.loads(m["Body"])["detail"]["object"]["key"] for m in dead) == sorted(HOSTILE_KEYS)
        assert all(reason_of(m) and m["MessageAttributes"]["lakeline_source"]["StringValue"] for m in dead)
        assert sent == ARRIVALS + ARRIVALS // DUPLICATE_EVERY + WAVES
        assert delivered == sent, "every message was delivered once: none failed, none came back"
        assert reported_failures == 0
        assert drain_messages(cloud.sqs, cloud.queue_url) == []


def test_router_concurrency_is_bounded_by_configuration() -> None:
    """How many arrivals are planned and started at once: at most ``router_max_concurrency`` router
    invocations per queue (Lambda's SQS scaling config); inside an execution, statements run one at a
    time (Map MaxConcurrency 1); the Spark engine's Glue job caps its concurrent runs."""
    _, pipeline = synthesized_templates("athena", 7)
    sqs_mappings = [
        m
        for m in resources_of(pipeline, "AWS::Lambda::EventSourceMapping").values()
        if "StartingPosition" not in m["Properties"]
    ]
    routers = [m for m in sqs_mappings if "Router" in json.dumps(m["Properties"]["FunctionName"])]
    # Each router reads its stage's queue, as configured, and its follow-up queue, with SQS's least concurrency.
    follow_ups = [m for m in routers if "FollowUps" in json.dumps(m["Properties"]["EventSourceArn"])]
    queues = [m for m in routers if m not in follow_ups]
    assert len(queues) == 2, "queue A → stage A router, queue B → stage B router"
    assert len(follow_ups) == 2, "each stage's follow-up queue → its router"
    for mapping in queues:
        assert mapping["Properties"]["ScalingConfig"] == {"MaximumConcurrency": 7}
        assert mapping["Properties"]["BatchSize"] == 10
    for mapping in follow_ups:
        assert mapping["Properties"]["ScalingConfig"] == {"MaximumConcurrency": FOLLOW_UP_CONCURRENCY}

    _, default = synthesized_templates("athena")
    defaults = [
        m["Properties"].get("ScalingConfig")
        for m in resources_of(default, "AWS::Lambda::EventSourceMapping").values()
        if "Router" in json.dumps(m["Properties"]["FunctionName"])
        and "FollowUps" not in json.dumps(m["Properties"]["EventSourceArn"])
    ]
    assert defaults == [{"MaximumConcurrency": LakelineConfig.router_max_concurrency}] * 2

    for stage, maps in (("StageA", ["RunPlanPublish"]), ("StageB", ["RunStepsSteps", "RunStepsPublish"])):
        states = state_machine_states(default, stage)
        for name in maps:
            assert states[name]["MaxConcurrency"] == 1, f"{stage} {name}"

    _, spark = synthesized_templates("spark")
    (job,) = resources_of(spark, "AWS::Glue::Job").values()
    assert job["Properties"]["ExecutionProperty"]["MaxConcurrentRuns"] == 20


@pytest.mark.parametrize("value", [0, 1, 1001])
def test_router_concurrency_outside_lambdas_range_is_refused(value: int) -> None:
    with pytest.raises(ConfigError, match="router_max_concurrency"):
        LakelineConfig.from_context({"router_max_concurrency": value})
