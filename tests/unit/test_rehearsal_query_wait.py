"""An Athena task of the local deployment waits for its query without asking 20 times a second (#36): it asks
again as soon as its own query ends, and at most ``QUERY_POLL_SECONDS`` apart otherwise. Other queries' ends do
not wake it: with a hundred executions waiting, each end would cost a hundred requests (#39)."""

from __future__ import annotations

import threading
import time

from lakeline.runtimes.deployed.local_aws import executions


def test_a_waiting_task_wakes_as_its_query_ends() -> None:
    with executions._watching("q-own"):
        ending = threading.Timer(0.1, executions.query_ended, args=("q-own",))
        ending.start()
        started = time.monotonic()
        executions._wait_for_the_end("q-own")
        assert time.monotonic() - started < executions.QUERY_POLL_SECONDS / 2
        ending.join()


def test_another_query_s_end_does_not_wake_it() -> None:
    with executions._watching("q-mine"), executions._watching("q-other"):
        ending = threading.Timer(0.1, executions.query_ended, args=("q-other",))
        ending.start()
        waited: list[float] = []
        waiter = threading.Thread(target=lambda: waited.append(_timed_wait("q-mine")))
        waiter.start()
        time.sleep(0.5)
        assert not waited, "the other query's end woke the task"
        executions.query_ended("q-mine")
        waiter.join(timeout=2)
        assert waited and waited[0] < executions.QUERY_POLL_SECONDS, waited


def test_with_no_query_ending_it_asks_again_after_the_interval_not_before() -> None:
    assert executions.QUERY_POLL_SECONDS >= 0.5
    with executions._watching("q-slow"):
        assert _timed_wait("q-slow") >= executions.QUERY_POLL_SECONDS * 0.9


def test_a_query_that_ended_before_the_wait_does_not_make_it_wait() -> None:
    with executions._watching("q-quick"):
        executions.query_ended("q-quick")
        assert _timed_wait("q-quick") < 0.2


def test_ends_of_queries_no_task_waits_on_are_not_kept() -> None:
    executions.query_ended("q-nobody")
    assert "q-nobody" not in executions._ended
    with executions._watching("q-done"):
        executions.query_ended("q-done")
    assert not {"q-done"} & (executions._ended | executions._watched)


def _timed_wait(query_id: str) -> float:
    started = time.monotonic()
    executions._wait_for_the_end(query_id)
    return time.monotonic() - started
