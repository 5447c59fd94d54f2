"""The life cycle of a stage B execution: root, parent and per-step events in the order things happen,
and steps that read what an earlier step of the same execution created."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

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


def _context() -> StepContext:
    return StepContext(PipelineRun(EXECUTION, ROOT, AT), CATALOG, SETTINGS, "athena")


def _fields(event: dict[str, Any], side: str, dataset: str) -> list[dict[str, Any]]:
    """The schema facet's fields, name and type (the type only where the facet has one)."""
    (found,) = [d for d in event[side] if d["name"].endswith(f".{dataset}")]
    return [{k: v for k, v in f.items() if k in ("name", "type")} for f in found["facets"]["schema"]["fields"]]


PIVOT_STEP = (
    "CREATE TABLE mart.pivoted AS SELECT * FROM (SELECT customer_id, status, amount FROM sales.orders) "
    "PIVOT (sum(amount) FOR status IN ('open' AS o, 'done' AS d))"
)


@pytest.mark.parametrize(
    ("sql", "inputs", "outputs"),
    [
        (PIVOT_STEP, ["sales.orders"], ["mart.pivoted"]),
        (
            "INSERT INTO mart.customer_flags SELECT customer_id FROM sales.orders",
            ["sales.orders"],
            ["mart.customer_flags"],
        ),
        (  # the temp table is written, then read back: not an input of the step
            "CREATE TABLE mart.t AS SELECT 1 AS a; INSERT INTO mart.t SELECT a FROM mart.t PIVOT (sum(a) FOR a IN (1))",
            [],
            ["mart.t"],
        ),
    ],
)
def test_a_step_without_column_lineage_keeps_its_tables(sql: str, inputs: list[str], outputs: list[str]) -> None:
    step = _context().from_sql("step0", sql, "sales")
    assert (step.input_names, step.output_names) == (inputs, outputs)
    event = event_to_dict(run_event(step, RunState.COMPLETE, at=AT))
    assert all("columnLineage" not in output["facets"] for output in event["outputs"])


def test_a_step_reading_what_a_refused_step_created_keeps_its_tables(caplog: pytest.LogCaptureFixture) -> None:
    context = _context()
    context.from_sql("step0", PIVOT_STEP, "sales")
    step = context.from_sql("step1", "INSERT INTO mart.customer_flags SELECT customer_id, o FROM mart.pivoted", "sales")
    assert (step.input_names, step.output_names) == (["mart.pivoted"], ["mart.customer_flags"])
    # Its columns are not known, and not made up: no schema facet for it.
    event = event_to_dict(run_event(step, RunState.COMPLETE, at=AT))
    assert "schema" not in event["inputs"][0]["facets"]
    assert "the columns of mart.pivoted are not known" in caplog.text


def test_only_sql_that_cannot_be_parsed_gives_a_run_without_tables(caplog: pytest.LogCaptureFixture) -> None:
    step = _context().from_sql("step0", "INSERT INTO mart.x SELEC FROM (", "sales")
    assert (step.input_names, step.output_names) == ([], [])
    assert "step0: no lineage at all" in caplog.text and "cannot parse SQL" in caplog.text


def test_created_tables_keep_their_declared_and_derived_types() -> None:
    context = _context()
    steps = [
        context.from_sql(f"step{index}", sql, "sales")
        for index, sql in enumerate(
            [
                "CREATE TABLE mart.tmp2 (customer_id bigint, total double) PARTITIONED BY (dt date)",
                "INSERT INTO mart.customer_flags SELECT customer_id, CAST(total AS varchar) FROM mart.tmp2",
                "CREATE TABLE mart.tmp3 AS SELECT p.customer_id, p.info, SUM(o.amount) AS total, NULL AS nothing "
                "FROM sales.profiles p JOIN sales.orders o ON o.customer_id = p.customer_id GROUP BY 1, 2",
                "INSERT INTO mart.customer_flags SELECT customer_id, info.city FROM mart.tmp3",
            ]
        )
    ]
    declared = event_to_dict(run_event(steps[1], RunState.COMPLETE, at=AT))
    assert _fields(declared, "inputs", "mart.tmp2") == [
        {"name": "customer_id", "type": "bigint"},
        {"name": "total", "type": "double"},
        {"name": "dt", "type": "date"},
    ]
    derived = event_to_dict(run_event(steps[2], RunState.COMPLETE, at=AT))
    assert _fields(derived, "outputs", "mart.tmp3") == [
        {"name": "customer_id", "type": "bigint"},
        {"name": "info", "type": "struct<city:string,geo:struct<lat:double,lon:double>>"},
        {"name": "total", "type": "double"},
        {"name": "nothing"},  # not known: left out, never made up
    ]
    # The struct's type lets a later step read one of its fields.
    (statement,) = steps[3].statements
    assert statement.edges()["flag"] == {("mart.tmp3.info.city", "DIRECT", "IDENTITY")}


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


def test_a_run_that_failed_after_its_steps_reports_them_complete_and_itself_failed() -> None:
    """The commit or the publish failed: every step ran and completed (as the embedded runtime emits them
    live); the execution failed. Not a step FAIL for a step that completed."""
    end = AT + timedelta(minutes=5)
    replayed = lifecycle(emits_root=False).replay(started_at=AT, ended_at=end, error="publish broke", after_steps=True)
    assert story(replayed) == [
        (EXECUTION.name, "START"),
        ("step0", "START"),
        ("step0", "COMPLETE"),
        ("step1", "START"),
        ("step1", "COMPLETE"),
        ("step2", "START"),
        ("step2", "COMPLETE"),
        (EXECUTION.name, "FAIL"),
    ]
