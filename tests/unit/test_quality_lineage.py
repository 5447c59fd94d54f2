"""Quality results in OpenLineage (#41): the checks' run of a stage execution, a child of it, reads the new version
(its ``version`` facet) and its end event carries ``dataQualityAssertions`` (an input facet, spec 1-1-0) and the
``dataQualityMetrics`` the checks measured; every event is checked against the schemas (``tests/conftest.py``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from openlineage.client.event_v2 import RunEvent

from lakeline.lineage.openlineage.bound import EVENT_SIZE_LIMIT, event_size, split_event
from lakeline.lineage.openlineage.events import event_to_dict
from lakeline.lineage.viewer.html import build_lineage_graph, graph_document, job_id
from lakeline.quality.checks import parse_checks
from lakeline.quality.evaluate import CheckResult, QualityReport
from lakeline.quality.gate import QualityGate
from stage_a.plan import StageAPlan
from stage_lineage.events import stage_a_lifecycle, stage_a_run
from tests.scale.test_stage_b_plan_size import full_checks
from tests.unit.test_pipeline_events import CATALOG, SETTINGS, TOKEN, plan

STARTED = datetime(2022, 1, 20, 10, 15, tzinfo=UTC)
ENDED = datetime(2022, 1, 20, 10, 20, tzinfo=UTC)
CHECKS_JOB = "stage_a.engineering_mysql_dev.customers.quality"
RULES = [
    {"rule": "RowCount > 0"},
    {"rule": 'IsComplete "name"', "severity": "warn"},
    {"rule": 'IsUnique "customer_id"'},
]


def checked_plan(rules: list[dict[str, str]] = RULES) -> StageAPlan:
    base = plan()
    gate = QualityGate.of(
        parse_checks(rules),
        database=base.target_database,
        table=base.table,
        temp_table=base.temp_table,
        partition=base.partition,
    )
    lease = {"key": "commit#x", "owner": TOKEN, "location": base.target_location, "version": 2}
    return replace(base, quality=gate, lease=lease)


def report(*results: CheckResult) -> QualityReport:
    return QualityReport("engineering_mysql_dev.customers (date=20220120)", results)


PASSED = report(
    CheckResult("RowCount > 0", "block", True, 4.0),
    CheckResult('IsComplete "name"', "warn", False, 0.75, ({"name": None},)),
    CheckResult('IsUnique "customer_id"', "block", True, 1.0),
)
BLOCKED = report(
    CheckResult("RowCount > 0", "block", True, 4.0),
    CheckResult('IsComplete "name"', "warn", True, 1.0),
    CheckResult('IsUnique "customer_id"', "block", False, 0.5, ({"customer_id": "7"},)),
)


def replayed(events: list[RunEvent]) -> list[tuple[str, str]]:
    return [(event.job.name, str(event_to_dict(event)["eventType"])) for event in events]


def checks_events(events: list[RunEvent]) -> list[dict[str, Any]]:
    return [event_to_dict(event) for event in events if event.job.name == CHECKS_JOB]


def test_a_published_version_s_checks_complete_as_a_child_of_the_execution_with_their_results() -> None:
    runs = stage_a_lifecycle(checked_plan(), catalog=CATALOG, settings=SETTINGS, engine="athena", report=PASSED)
    events = runs.replay(started_at=STARTED, ended_at=ENDED)
    step = "stage_a.engineering_mysql_dev.customers"
    assert replayed(events)[2:] == [
        (step, "START"),
        (step, "COMPLETE"),
        (CHECKS_JOB, "START"),
        (CHECKS_JOB, "COMPLETE"),
        ("stage_a", "COMPLETE"),
        ("pipeline", "COMPLETE"),
    ]
    start, complete = checks_events(events)
    execution = stage_a_run(checked_plan(), SETTINGS).execution
    assert complete["run"]["facets"]["parent"]["run"]["runId"] == execution.run_id
    assert complete["run"]["facets"]["parent"]["job"]["name"] == "stage_a"
    assert complete["outputs"] == []
    (checked,) = complete["inputs"]
    assert checked["name"].endswith("engineering_mysql_dev.customers")
    assert checked["facets"]["version"]["datasetVersion"] == f"v3.{TOKEN}"  # the candidate version
    assertions = checked["inputFacets"]["dataQualityAssertions"]["assertions"]
    assert [(a["assertion"], a.get("column"), a["success"], a["severity"]) for a in assertions] == [
        ("RowCount", None, True, "error"),
        ("IsComplete", "name", False, "warn"),
        ("IsUnique", "customer_id", True, "error"),
    ]
    assert assertions[1]["content"] == 'IsComplete "name"' and assertions[1]["actual"] == "0.75"
    metrics = checked["facets"]["dataQualityMetrics"]
    assert metrics["rowCount"] == 4
    assert metrics["columnMetrics"] == {"name": {"nullCount": 1}, "customer_id": {"distinctCount": 4}}
    # Results are known when the checks end: the START says which version they read, no more.
    (read,) = start["inputs"]
    assert "inputFacets" not in read and "dataQualityMetrics" not in read["facets"]


def test_a_blocked_version_s_checks_fail_with_their_results_and_the_execution_fails() -> None:
    runs = stage_a_lifecycle(checked_plan(), catalog=CATALOG, settings=SETTINGS, engine="athena", report=BLOCKED)
    reason = "quality failed: QualityBlocked: quality checks blocked ...: rule 'IsUnique \"customer_id\"' failed"
    events = runs.replay(started_at=STARTED, ended_at=ENDED, error=reason, after_steps=True, checks_failed=True)
    assert [state for job, state in replayed(events) if job != "pipeline"][1:] == [
        "START",
        "COMPLETE",  # the writes completed: it is their version that was refused
        "START",
        "FAIL",
        "FAIL",
    ]
    _, failed = checks_events(events)
    assert failed["run"]["facets"]["errorMessage"]["message"] == reason
    (checked,) = failed["inputs"]
    assertions = checked["inputFacets"]["dataQualityAssertions"]["assertions"]
    assert [a["success"] for a in assertions] == [True, True, False]
    assert checked["facets"]["dataQualityMetrics"]["columnMetrics"] == {"name": {"nullCount": 0}}


def test_checks_that_never_ran_are_aborted_and_a_table_without_checks_has_no_checks_run() -> None:
    runs = stage_a_lifecycle(checked_plan(), catalog=CATALOG, settings=SETTINGS, engine="athena")
    events = runs.replay(started_at=STARTED, ended_at=ENDED, error="ctas failed", failed_step=0)
    (aborted,) = checks_events(events)
    assert aborted["eventType"] == "ABORT" and "inputFacets" not in aborted["inputs"][0]
    unchecked = stage_a_lifecycle(plan(), catalog=CATALOG, settings=SETTINGS, engine="athena")
    assert checks_events(unchecked.replay(started_at=STARTED, ended_at=ENDED)) == []


def test_a_report_of_the_most_checks_a_table_may_declare_fits_one_event() -> None:
    """100 rules of 64,000 bytes together, quoted at every other character (JSON escapes them again), each failed
    with a metric and a note: the checks' end event stays one event under the 300,000-byte bound."""
    rules = full_checks()
    results = tuple(CheckResult(rule["rule"], "block", False, 0.123456789, note="n" * 100) for rule in rules)
    runs = stage_a_lifecycle(
        checked_plan(rules), catalog=CATALOG, settings=SETTINGS, engine="athena", report=report(*results)
    )
    events = runs.replay(started_at=STARTED, ended_at=ENDED, error="blocked", after_steps=True, checks_failed=True)
    (failed,) = [e for e in events if e.job.name == CHECKS_JOB and event_to_dict(e)["eventType"] == "FAIL"]
    size = event_size(failed)
    print(f"the checks' FAIL event of 100 rules: {size} bytes")
    assert 64_000 < size < EVENT_SIZE_LIMIT // 2
    assert len(split_event(failed)) == 1


def test_the_picture_marks_the_dataset_its_latest_checks_failed_and_lists_the_rules() -> None:
    """The checks' FAIL event of a blocked version marks the checked dataset in ``lineage.html`` (its failed rules
    in its details); a later version whose checks passed clears the mark."""
    reason = "quality failed: QualityBlocked: quality checks blocked engineering_mysql_dev.customers"
    blocked = stage_a_lifecycle(checked_plan(), catalog=CATALOG, settings=SETTINGS, engine="athena", report=BLOCKED)
    first = blocked.replay(started_at=STARTED, ended_at=ENDED, error=reason, after_steps=True, checks_failed=True)
    events = [event_to_dict(event) for event in first]
    graph = build_lineage_graph(events)
    (dataset,) = [node for node in graph.datasets.values() if node.name.endswith("engineering_mysql_dev.customers")]
    assert dataset.failed_checks == ['IsUnique "customer_id"']
    # The checks' job is drawn as its dataset's mark, not a node; the stage run's box says BLOCKED.
    assert CHECKS_JOB not in [job.name for job in graph.jobs.values()]
    assert graph.jobs[job_id(SETTINGS.namespace, "stage_a")].blocked
    assert not graph.jobs[job_id(SETTINGS.namespace, "stage_a.engineering_mysql_dev.customers")].failed
    (item,) = [node for node in graph_document(graph)["nodes"] if node["id"] == dataset.id]
    assert item["failedChecks"] == ['IsUnique "customer_id"']
    assert [(c["rule"], c["success"], c["severity"], c["actual"]) for c in item["checks"]] == [
        ("RowCount > 0", True, "error", "4"),
        ('IsComplete "name"', True, "warn", "1"),
        ('IsUnique "customer_id"', False, "error", "0.5"),
    ]
    later = replace(checked_plan(), run_token="20220120t111500123456_0123456789")
    passed = stage_a_lifecycle(later, catalog=CATALOG, settings=SETTINGS, engine="athena", report=PASSED)
    second = passed.replay(
        started_at=datetime(2022, 1, 20, 11, 15, tzinfo=UTC), ended_at=datetime(2022, 1, 20, 11, 20, tzinfo=UTC)
    )
    graph = build_lineage_graph([*events, *(event_to_dict(event) for event in second)])
    assert graph.datasets[dataset.id].failed_checks == ['IsComplete "name"']  # the latest checks: one warn failed
