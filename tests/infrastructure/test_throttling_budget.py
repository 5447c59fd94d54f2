"""Back-pressure instead of bulk parking (#39): in a backfill, hundreds of executions hold Athena, Glue and Lambda
at their quotas for a long while; every task those services can throttle waits and tries again for longer than
that, instead of failing its run (which parks everything the run took). Read from the synthesized state machines
of both engines, so a task added without the budget fails here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.infrastructure.test_stacks import state_machine_definition, synthesized

THROTTLED = {
    ":athena:startQueryExecution": "Athena.TooManyRequestsException",
    ":glue:startJobRun": "Glue.ConcurrentRunsExceededException",
    ":lambda:invoke": "Lambda.TooManyRequestsException",
}
AT_LEAST = 60 * 60  # seconds a task may wait out throttling, summed over its retries, before its run fails


def tasks(states: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, state in states.items():
        if state.get("Type") == "Task":
            yield name, state
        for branch in (state.get("ItemProcessor") or state.get("Iterator") or {}, *state.get("Branches", [])):
            yield from tasks(branch.get("States", {}))


def longest_wait(retry: dict[str, Any]) -> float:
    """The seconds a retrier may wait in all (each wait before jitter; full jitter averages half of it)."""
    interval, rate, cap = retry.get("IntervalSeconds", 1), retry.get("BackoffRate", 2.0), retry.get("MaxDelaySeconds")
    waits = [interval * rate**attempt for attempt in range(retry.get("MaxAttempts", 3))]
    return sum(min(wait, cap) if cap else wait for wait in waits)


@pytest.mark.parametrize("engine", ["athena", "spark"])
@pytest.mark.parametrize("stage", ["StageA", "StageB"])
def test_every_task_a_service_can_throttle_waits_out_a_backfill(engine: str, stage: str) -> None:
    _, pipeline = synthesized(engine)
    checked = 0
    for name, task in tasks(state_machine_definition(pipeline, stage)["States"]):
        resource = task.get("Resource", "")
        (error,) = [error for service, error in THROTTLED.items() if service in resource] or [None]
        if error is None:
            continue
        retriers = task.get("Retry", [])
        first = next((retry for retry in retriers if error in retry["ErrorEquals"]), None)
        assert first is not None, f"{name}: {error} is not retried"
        # The first retrier that names the error is the one Step Functions uses for it.
        assert longest_wait(first) >= AT_LEAST, (name, first)
        assert first.get("MaxDelaySeconds", 0) <= 300 and first.get("JitterStrategy") == "FULL", (name, first)
        checked += 1
    assert checked >= 5, f"{engine} {stage}: only {checked} throttled tasks found"
