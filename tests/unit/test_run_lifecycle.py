"""The life cycle of a stage B execution: root, parent and per-step events in the order things happen,
and steps that read what an earlier step of the same execution created."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from openlineage.client.event_v2 import RunEvent, RunState

from lakeline.catalog_json import CatalogFile
from lakeline.lineage.openlineage.config import OpenLineageSettings, RunReference
from lakeline.lineage.openlineage.events import event_to_dict, run_event
from lakeline.lineage.openlineage.run_lifecycle import ExecutionLifecycle
from stage_lineage.events import PipelineRun, StepContext

CATALOG = CatalogFile.load(Path(__file__).parent / "data" / "column_lineage_catalog.json")
SETTINGS = OpenLineageSettings(namespace="lakeline-dev", dataset_namespace="awsathena://athena.eu-west-1.amazonaws.com")
AT = datetime(2024, 1, 20, 6, 0, tzinfo=UTC)
EXECUTION = RunReference("lakeline-dev", "stage_b.mart.customer_flags", "01930000-0000-7000-8000-00000000000e")
ROOT = RunReference("lakeline-dev", "pipeline", "01930000-0000-7000-8000-00000000000a")
STEPS = [
    "CREATE TABLE mart.tmp_totals AS SELECT customer_id, SUM(amount) AS total FROM sales.orders GROUP BY customer_id",
    "INSERT INTO mart.customer_flags SELECT customer_id, CAST(total AS varchar) FROM mart.tmp_totals",
    "DROP TABLE mart.tmp_totals",
]


def lifecycle(*, emits_root: bool = True) -> ExecutionLifecycle:
    context = StepContext(PipelineRun(EXECUTION, ROOT, AT), CATALOG, SETTINGS, "athena")
    steps = [context.from_sql(f"{EXECUTION.name}.step{i}", sql, "sales") for i, sql in enumerate(STEPS)]
    return ExecutionLifecycle(steps, EXECUTION, ROOT, emits_root, SETTINGS.dataset_namespace, "athena")


def story(events: list[RunEvent]) -> list[tuple[str, str]]:
    return [(event.job.name.removeprefix(f"{EXECUTION.name}."), event.eventType.value) for event in events]


def test_a_step_reads_the_table_an_earlier_step_created() -> None:
    steps = lifecycle().steps
    assert steps[1].input_names == ["mart.tmp_totals"]
    (statement,) = steps[1].statements
    assert statement.edges()["flag"] == {("mart.tmp_totals.total", "DIRECT", "IDENTITY")}  # a cast keeps values
    event = event_to_dict(run_event(steps[1], RunState.COMPLETE, at=AT))
    assert {f["name"] for f in event["inputs"][0]["facets"]["schema"]["fields"]} == {"customer_id", "total"}


def test_live_events_follow_what_happens_with_a_failure_in_the_middle() -> None:
    runs = lifecycle()
    tick = iter(AT + timedelta(seconds=second) for second in range(100))
    events = runs.started(next(tick))
    events.append(runs.step_started(0, next(tick)))
    events.append(runs.step_finished(0, next(tick)))
    events.append(runs.step_started(1, next(tick)))
    events.append(runs.step_finished(1, next(tick), error="COLUMN_NOT_FOUND: total"))
    events += runs.finished(next(tick), error="step 1 failed")
    assert story(events) == [
        ("pipeline", "START"),
        (EXECUTION.name, "START"),
        ("step0", "START"),
        ("step0", "COMPLETE"),  # a step that finished stays finished when a later one fails
        ("step1", "START"),
        ("step1", "FAIL"),
        ("step2", "ABORT"),  # never ran: no START, no FAIL
        (EXECUTION.name, "FAIL"),
        ("pipeline", "FAIL"),
    ]
    times = [event.eventTime for event in events]
    assert times == sorted(times)
    assert times[2] < times[3] < times[4]  # each step STARTs when it starts, not all at once
    documents = [event_to_dict(event) for event in events]
    parent = documents[1]["run"]["facets"]["parent"]
    assert (parent["job"]["name"], parent["run"]["runId"]) == ("pipeline", ROOT.run_id)
    assert documents[2]["run"]["facets"]["parent"]["run"]["runId"] == EXECUTION.run_id
    assert documents[5]["run"]["facets"]["errorMessage"]["message"] == "COLUMN_NOT_FOUND: total"
    assert all(d["run"]["runId"] == EXECUTION.run_id for d in documents if d["job"]["name"] == EXECUTION.name)
    with pytest.raises(ValueError, match="already started"):
        runs.step_started(0)


def test_a_replay_after_the_fact_tells_the_same_story() -> None:
    end = AT + timedelta(minutes=5)
    replayed = lifecycle(emits_root=False).replay(started_at=AT, ended_at=end, failed_step=1, error="boom")
    assert story(replayed) == [
        (EXECUTION.name, "START"),
        ("step0", "START"),
        ("step0", "COMPLETE"),
        ("step1", "START"),
        ("step1", "FAIL"),
        ("step2", "ABORT"),
        (EXECUTION.name, "FAIL"),
    ]
    unknown = lifecycle(emits_root=False).replay(started_at=AT, ended_at=end, error="boom")
    assert story(unknown) == [(EXECUTION.name, "START"), (EXECUTION.name, "FAIL")]
    success = lifecycle().replay(started_at=AT, ended_at=end)
    assert [state for _, state in story(success)].count("COMPLETE") == 3 + 2
    with pytest.raises(ValueError, match="has no step 7"):
        lifecycle().replay(started_at=AT, ended_at=end, failed_step=7, error="x")


def test_a_replay_dates_the_steps_whose_times_are_known_and_keeps_the_order_for_the_others() -> None:
    """#21: before, ``step_times`` was all or nothing, so a failed run (whose Map output is lost) could not
    date its failed step by its query; a step without times is dated when the one before it ended."""
    end = AT + timedelta(minutes=9)
    at = [AT + timedelta(minutes=m) for m in range(8)]
    failed = lifecycle(emits_root=False).replay(
        started_at=AT, ended_at=end, failed_step=1, error="boom", step_times=[None, (at[2], at[3])]
    )
    dated = [(name, state, event.eventTime) for (name, state), event in zip(story(failed), failed, strict=True)]
    assert dated == [
        (EXECUTION.name, "START", AT.isoformat()),
        ("step0", "START", AT.isoformat()),
        ("step0", "COMPLETE", AT.isoformat()),
        ("step1", "START", at[2].isoformat()),
        ("step1", "FAIL", at[3].isoformat()),
        ("step2", "ABORT", end.isoformat()),
        (EXECUTION.name, "FAIL", end.isoformat()),
    ]
    success = lifecycle(emits_root=False).replay(started_at=AT, ended_at=end, step_times=[(at[1], at[4])])
    times = [event.eventTime for event in success]
    assert times == [AT.isoformat(), at[1].isoformat()] + [at[4].isoformat()] * 5 + [end.isoformat()]
