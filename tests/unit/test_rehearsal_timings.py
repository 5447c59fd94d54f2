"""The local deployment's timing collector: off, it records nothing; on, it files time by name and key (#36)."""

from __future__ import annotations

import time

from lakeline.runtimes.deployed.local_aws import timings


def test_nothing_is_recorded_while_no_collector_is_on() -> None:
    assert not timings.enabled()
    with timings.phase("synth"):
        pass
    timings.record("athena: Spark SQL", 1.0, "query")
    with timings.collecting() as timed:
        pass
    assert dict(timed.totals) == {}


def test_an_executions_time_includes_its_queries() -> None:
    with timings.collecting() as timed:
        with timings.phase("execution", "arn:execution"):
            time.sleep(0.01)
        timings.record("task: lambda:invoke", 0.5, "arn:execution")
        timings.link("query-1", "arn:execution")
        timings.record("athena: Spark SQL", 2.0, "query-1")
        timings.record("athena: Spark SQL", 3.0, "query-2")  # another execution's, or the operator's
    assert not timings.enabled()
    assert timed.totals["athena: Spark SQL"] == 5.0
    assert timed.counts["athena: Spark SQL"] == 2
    spent = timed.of_execution("arn:execution")
    assert spent["execution"] >= 0.01
    assert spent["task: lambda:invoke"] == 0.5
    assert spent["athena: Spark SQL"] == 2.0
