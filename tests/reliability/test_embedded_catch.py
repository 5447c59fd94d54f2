"""The embedded runtime takes a failure after the SQL as the state machines' Catch does (#20).

Deployed, every state after a stage's SQL (the partition commit, the catalog swap, the post-update) has a
Catch into the stage's failure function, which ends the partition's lease and parks the input with its
reason. The embedded runtime (``EventFlow``, what ``lakeline run --embedded`` runs) must do the same: left
to SQS's redelivery alone, a publish that keeps failing parks the message after its last try but leaves
the lease held, so the next file of the partition waits behind a run that is gone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from lakeline.commits import PartitionCommits, commit_key
from lakeline.dependencies.model import DependencyItem, parse_dependency_item
from lakeline.engines.base import QueryFailed
from lakeline.engines.spark import SparkEngine
from lakeline.operations.dead_letters import redrive
from lakeline.project.workspace import Workspace
from lakeline.run_order import EMBEDDED_ENGINE, STAGE_A, STAGE_B, FailedStep, RunOrder, StepKind
from lakeline.runtimes.embedded import event_flow
from lakeline.runtimes.embedded.cloud import LocalCloud
from lakeline.runtimes.embedded.event_flow import EventFlow
from lakeline.runtimes.embedded.handler_caches import reset_handler_caches
from lakeline.storage import local_root
from stage_a.plan import StageAPlan
from stage_b.plan import StageBPlan
from tests.rehearsal.support import daily_item

ENV = "embcatch"
STAGE = f"eng_shop_{ENV}"
QUERIES = Path(__file__).resolve().parents[2] / "athena_queries"
DAY = "20220301"


def orders_file(workspace: Workspace, part: int) -> str:
    key = f"eng/shop/orders/date={DAY}/part{part}.csv"
    path = workspace.raw_dir / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("id,amount\n" + "".join(f"{part * 100 + i},{i}.5\n" for i in range(3)))
    return key


@pytest.fixture
def flow(spark_engine: SparkEngine, tmp_path: Path) -> Iterator[tuple[EventFlow, LocalCloud, Workspace]]:
    workspace = Workspace.at(tmp_path / "workspace")
    environment = dict(os.environ)
    reset_handler_caches()
    cloud = LocalCloud.start()
    try:
        yield EventFlow(cloud, spark_engine, workspace, workspace.settings(environment=ENV), QUERIES), cloud, workspace
    finally:
        cloud.stop()
        reset_handler_caches()
        os.environ.clear()
        os.environ.update(environment)
        spark_engine.session.sql(f"DROP DATABASE IF EXISTS {STAGE} CASCADE")
        spark_engine.session.sql(f"DROP DATABASE IF EXISTS eng_shop_raw_{ENV} CASCADE")


def parked(cloud: LocalCloud, queue: str) -> list[dict[str, Any]]:
    answer = cloud.sqs.receive_message(
        QueueUrl=cloud.queue_urls[queue], MaxNumberOfMessages=10, MessageAttributeNames=["All"], VisibilityTimeout=0
    )
    return answer.get("Messages", [])


def test_a_publish_that_fails_ends_the_lease_and_parks_the_file_at_once(
    flow: tuple[EventFlow, LocalCloud, Workspace], spark_engine: SparkEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime, cloud, workspace = flow
    published = event_flow.publish_stage_a
    broken = True

    def publish(*args: Any, **kwargs: Any) -> Any:
        if broken:
            raise RuntimeError("the catalog swap broke")
        return published(*args, **kwargs)

    monkeypatch.setattr(event_flow, "publish_stage_a", publish)
    first = orders_file(workspace, 1)
    runtime.arrive(first)
    runtime.run_until_idle()

    (failure,) = runtime.report.failures
    assert first in failure and "the catalog swap broke" in failure
    (message,) = parked(cloud, "queue-a-dlq")
    assert first in message["Body"]
    state = PartitionCommits(cloud.dynamodb, cloud.names.pipeline_state).read(
        commit_key(f"{STAGE}.orders", f"date={DAY}")
    )
    assert state.lease_owner is None, state  # ended by the failure path, not left to expire

    # Fixed: the partition's next file is not held back behind the failed run. The failed run had committed
    # its version (only the catalog swap failed), so the next run builds on it: both files' rows.
    broken = False
    runtime.arrive(orders_file(workspace, 2))
    runtime.run_until_idle()
    assert len(runtime.report.failures) == 1
    count = f"SELECT count(*) FROM {STAGE}.orders WHERE \"date\" = '{DAY}'"
    assert spark_engine.execute(count).rows == [(6,)]
    # The parked message sent back finds its file loaded: nothing doubled, the DLQ empty.
    assert redrive(cloud.sqs, cloud.queue_urls["queue-a-dlq"], cloud.queue_urls["queue-a"])[0] == 1
    runtime.run_until_idle()
    assert len(runtime.report.failures) == 1 and parked(cloud, "queue-a-dlq") == []
    assert spark_engine.execute(count).rows == [(6,)]


class StepRecorder:
    """What the embedded runtime runs, by the run order's kinds of step (``lakeline.run_order``), and the failed
    step each failure function is told; ``failing``: the stage and the kind of step that raises."""

    def __init__(self, runtime: EventFlow, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ran: list[tuple[str, StepKind]] = []
        self.failed_steps: list[tuple[str, str]] = []
        self.failing: tuple[str, StepKind] | None = None
        self.plans: list[StageAPlan | StageBPlan] = []  # each run's, as its writes took it
        for stage in ("a", "b"):
            for kind, name in (("writes", f"execute_stage_{stage}"), ("publish", f"publish_stage_{stage}")):
                monkeypatch.setattr(event_flow, name, self.recorded(stage, kind, getattr(event_flow, name)))
            for kind, name in (("post_update", f"_stage_{stage}_post_update"), ("failure", f"_stage_{stage}_failure")):
                monkeypatch.setattr(runtime, name, self.recorded(stage, kind, getattr(runtime, name)))
        monkeypatch.setattr(runtime, "_partition_commit", self.recorded("?", "commit", runtime._partition_commit))
        monkeypatch.setattr(runtime, "_quality", self.recorded("?", "quality", runtime._quality))

    def recorded(self, stage: str, kind: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def record(*args: Any, **kwargs: Any) -> Any:
            if kind == "failure":
                self.failed_steps.append((stage, args[0]["failed_step"]))
                return call(*args, **kwargs)
            # The commit function and the quality step are both stages': their stage is the last step's.
            step = (self.ran[-1][0] if stage == "?" else stage, cast(StepKind, kind))
            self.ran.append(step)
            if kind == "writes":
                self.plans.append(args[0])
            if step == self.failing:
                raise RuntimeError(f"stage {step[0].upper()}'s {kind} broke")
            return call(*args, **kwargs)

        return record


def kinds_in_order(order: RunOrder) -> list[StepKind]:
    """The kinds of step of ``order`` as the embedded runtime runs them (its writes in one call)."""
    kinds: list[StepKind] = []
    for step in order.steps(EMBEDDED_ENGINE):
        if step.kind not in kinds:
            kinds.append(step.kind)
    return kinds


def write_steps(plan: StageAPlan | StageBPlan) -> dict[str, FailedStep]:
    """Each statement of ``plan``'s writes, by the step of the Athena engine's that runs it
    (``stacks.constructs.engines.AthenaEngineSteps``)."""
    named: dict[str, FailedStep] = dict.fromkeys(plan.reconcile, "reconcile")
    if isinstance(plan, StageBPlan):
        return named | dict.fromkeys([*(step.sql for step in plan.steps), *[plan.drop_temp or ""]], "steps")
    if plan.register_raw:
        named[plan.register_raw] = "register"
    if plan.type_check:
        named |= dict.fromkeys([plan.type_check.create, plan.type_check.check, plan.type_check.drop], "type_check")
    source = [plan.source.create, plan.source.drop] if plan.source else []
    return named | dict.fromkeys([*source, plan.ctas, plan.drop_temp], "ctas")


def daily_orders(workspace: Workspace, engine: SparkEngine) -> DependencyItem:
    """A stage B target built from each day of ``orders``."""
    analytics = f"eng_analytics_{ENV}"
    engine.execute(f"CREATE DATABASE IF NOT EXISTS {analytics}")
    location = local_root(workspace.analytics_dir / analytics / "orders_daily")
    engine.session.sql(
        f"CREATE TABLE {analytics}.orders_daily (orders BIGINT, `date` STRING) USING parquet "
        f"PARTITIONED BY (`date`) LOCATION '{location}'"
    )
    sql = f"INSERT INTO {analytics}.orders_daily SELECT count(*), '$day' FROM {STAGE}.orders WHERE \"date\" = '$day'"
    step = {"db": analytics, "info": "count the day's orders", "sql": sql}
    return parse_dependency_item(daily_item(f"{analytics}.orders_daily", "overwrite", [step], source=f"{STAGE}.orders"))


@pytest.mark.parametrize(("order", "stage"), [(STAGE_A, "a"), (STAGE_B, "b")], ids=["stage_a", "stage_b"])
def test_the_embedded_runtime_runs_each_stages_steps_in_its_run_order(
    flow: tuple[EventFlow, LocalCloud, Workspace],
    spark_engine: SparkEngine,
    monkeypatch: pytest.MonkeyPatch,
    order: RunOrder,
    stage: str,
) -> None:
    """#38: the steps the state machines run (``tests/infrastructure/test_run_order.py``) are the ones the embedded
    runtime runs, in that order: a run that succeeds runs each kind of step of the order once, in the order's order,
    and a run whose step fails stops there and tells the failure function the name the order gives that step."""
    runtime, _, workspace = flow
    spark_engine.execute(f"DROP DATABASE IF EXISTS eng_analytics_{ENV} CASCADE")
    runtime.register([daily_orders(workspace, spark_engine)])
    kinds = kinds_in_order(order)
    expected = {step.kind: step.name for step in order.steps(EMBEDDED_ENGINE) if step.kind != "writes"}
    # A failed write before any statement ran: the first task's, reconcile (as the state machine's Catch on it).
    expected["writes"] = "reconcile"
    recorder = StepRecorder(runtime, monkeypatch)
    executed: list[str] = []
    execute = spark_engine.execute

    def recorded_execute(sql: str, *args: Any, **kwargs: Any) -> Any:
        executed.append(sql)
        return execute(sql, *args, **kwargs)

    monkeypatch.setattr(spark_engine, "execute", recorded_execute)

    def arrive(day: int, part: int, failing: StepKind | None) -> list[StepKind]:
        """A file of the day's orders, through the flow: the kinds of step the stage ran."""
        recorder.ran, recorder.failed_steps, recorder.plans, executed[:] = [], [], [], []
        recorder.failing = (stage, failing) if failing else None
        key = f"eng/shop/orders/date=202203{day}/part{part}.csv"
        (workspace.raw_dir / key).parent.mkdir(parents=True, exist_ok=True)
        (workspace.raw_dir / key).write_text(f"id,amount\n{part}1,1.5\n{part}2,2.5\n")
        runtime.arrive(key)
        runtime.run_until_idle()
        return [kind for step_stage, kind in recorder.ran if step_stage == stage]

    def writes_in_order() -> list[FailedStep]:
        """The write steps of the Athena engine's that the run's one call of its writes ran, checked to be in the
        order's order."""
        (plan,) = [plan for plan in recorder.plans if isinstance(plan, StageAPlan if stage == "a" else StageBPlan)]
        named = write_steps(plan)
        steps = [named[sql] for sql in executed if sql in named]
        steps = [step for index, step in enumerate(steps) if index == 0 or steps[index - 1] != step]
        assert steps == [step for step in order.writes[EMBEDDED_ENGINE] if step in steps], steps
        return steps

    try:
        for day, failing in enumerate([None, *kinds], start=10):
            ran = arrive(day, 1, failing)
            if failing is None:
                assert ran == kinds and recorder.failed_steps == []
                assert writes_in_order() == {"a": ["register", "type_check", "ctas"], "b": ["steps"]}[stage]
                continue
            assert ran == kinds[: kinds.index(failing) + 1], f"{failing} failed: the run went on"
            assert recorder.failed_steps == [(stage, expected[failing])], f"{failing} failed"
            assert expected[failing] in order.failed_steps
        # The next run of the partition whose catalog swap failed points its catalog at its committed version first.
        assert arrive(10 + kinds.index("publish") + 1, 2, None) == kinds and recorder.failed_steps == []
        assert writes_in_order()[0] == "reconcile"
    finally:
        spark_engine.execute(f"DROP DATABASE IF EXISTS eng_analytics_{ENV} CASCADE")


@pytest.mark.parametrize(
    ("failing_sql", "step"),
    [
        ("ADD IF NOT EXISTS PARTITION", "register"),  # the raw partition's registration
        ("lakeline type check", "type_check"),
        ("CREATE TABLE", "ctas"),
    ],
)
def test_a_failed_write_is_named_as_the_state_machines_task_that_runs_it(
    flow: tuple[EventFlow, LocalCloud, Workspace],
    spark_engine: SparkEngine,
    monkeypatch: pytest.MonkeyPatch,
    failing_sql: str,
    step: FailedStep,
) -> None:
    """The embedded runtime runs a stage's writes in one call: the failure function is told the step of the task
    that failed, as the state machine's Catch on that task tells it, and the file is parked with the reason."""
    runtime, cloud, workspace = flow
    recorder = StepRecorder(runtime, monkeypatch)
    execute = spark_engine.execute
    seen: list[str] = []

    def failing_execute(sql: str, *args: Any, **kwargs: Any) -> Any:
        if failing_sql in sql and not seen:
            seen.append(sql)
            raise QueryFailed("the statement broke", sql=sql, reason="broke")
        return execute(sql, *args, **kwargs)

    monkeypatch.setattr(spark_engine, "execute", failing_execute)
    first = orders_file(workspace, 1)
    runtime.arrive(first)
    runtime.run_until_idle()
    assert seen, f"no statement with {failing_sql!r} ran"
    assert recorder.failed_steps == [("a", step)]
    (message,) = parked(cloud, "queue-a-dlq")
    assert first in message["Body"]


def test_a_run_with_nothing_new_whose_reconcile_fails_goes_to_the_failure_function_named_reconcile(
    flow: tuple[EventFlow, LocalCloud, Workspace], spark_engine: SparkEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stage B's catalog swap fails after its commit, and its message is parked; sent back, the message is applied
    already (nothing new), so its run only points the catalog at the committed version (reconcile). When that fails
    too, the failure function is told ``reconcile``, as the state machine's Catch on that task tells it."""
    runtime, cloud, workspace = flow
    spark_engine.execute(f"DROP DATABASE IF EXISTS eng_analytics_{ENV} CASCADE")
    runtime.register([daily_orders(workspace, spark_engine)])
    recorder = StepRecorder(runtime, monkeypatch)
    recorder.failing = ("b", "publish")
    try:
        runtime.arrive(orders_file(workspace, 1))
        runtime.run_until_idle()
        assert recorder.failed_steps == [("b", "publish")]
        recorder.failing, recorder.failed_steps, recorder.ran = None, [], []
        execute = spark_engine.execute

        def failing_reconcile(sql: str, *args: Any, **kwargs: Any) -> Any:
            if "SET LOCATION" in sql and "orders_daily" in sql:
                raise QueryFailed("the reconcile broke", sql=sql, reason="broke")
            return execute(sql, *args, **kwargs)

        monkeypatch.setattr(spark_engine, "execute", failing_reconcile)
        assert redrive(cloud.sqs, cloud.queue_urls["queue-b-dlq"], cloud.queue_urls["queue-b"])[0] == 1
        runtime.run_until_idle()
        assert recorder.failed_steps == [("b", "reconcile")]
        assert [kind for stage, kind in recorder.ran if stage == "b"] == ["writes"]
    finally:
        spark_engine.execute(f"DROP DATABASE IF EXISTS eng_analytics_{ENV} CASCADE")
