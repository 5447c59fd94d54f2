"""An Athena task of the local deployment waits for its query without asking 20 times a second (#36): it asks
again as soon as a query ends, and at most ``QUERY_POLL_SECONDS`` apart otherwise."""

from __future__ import annotations

import threading
import time

from lakeline.local.rehearsal import executions


def test_a_waiting_task_wakes_as_a_query_ends() -> None:
    seen = executions._queries_ended
    ending = threading.Timer(0.1, executions.query_ended)
    ending.start()
    started = time.monotonic()
    executions._wait_for_a_query_end(seen)
    assert time.monotonic() - started < executions.QUERY_POLL_SECONDS / 2
    ending.join()


def test_with_no_query_ending_it_asks_again_after_the_interval_not_before() -> None:
    assert executions.QUERY_POLL_SECONDS >= 0.5
    started = time.monotonic()
    executions._wait_for_a_query_end(executions._queries_ended)
    assert time.monotonic() - started >= executions.QUERY_POLL_SECONDS * 0.9


def test_a_query_that_ended_before_the_wait_does_not_make_it_wait() -> None:
    seen = executions._queries_ended
    executions.query_ended()
    started = time.monotonic()
    executions._wait_for_a_query_end(seen)
    assert time.monotonic() - started < 0.2
