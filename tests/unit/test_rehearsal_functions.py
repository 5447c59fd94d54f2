"""A deployed function's environment in the rehearsal (``lakeline.local.rehearsal.functions``), without an
endpoint: warm between invocations, its errors named as Lambda names them, stopped at its timeout."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeline.local.rehearsal.functions import BundledFunction, FunctionError, WarmFunction

HANDLER = """
import time

calls = []


def handler(event, context):
    calls.append(event)
    if event.get("sleep"):
        time.sleep(event["sleep"])
    if event.get("fail"):
        raise KeyError(event["fail"])
    return {"calls": len(calls), "remaining_ms": context.get_remaining_time_in_millis()}
"""


@pytest.fixture
def function(tmp_path: Path) -> WarmFunction:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "slow.py").write_text(HANDLER)
    bundled = BundledFunction("Slow", "arn:aws:lambda:us-east-1:1:function:Slow", "slow.handler",
                              tmp_path / "code", (), {}, "", timeout=1)  # fmt: skip
    return WarmFunction(bundled, endpoint="http://127.0.0.1:1", region="us-east-1", log=tmp_path / "slow.log",
                        credentials=None)  # fmt: skip


def test_an_environment_stays_warm_and_names_errors_as_lambda_does(function: WarmFunction) -> None:
    try:
        assert function.invoke({}) == {"calls": 1, "remaining_ms": 1000}
        assert function.invoke({})["calls"] == 2  # the same process: module state survives
        with pytest.raises(FunctionError) as failed:
            function.invoke({"fail": "colour"})
        assert (failed.value.error_type, failed.value.error_message) == ("KeyError", "'colour'")
    finally:
        function.stop()


def test_an_invocation_past_the_timeout_is_stopped_and_the_next_gets_a_new_environment(function: WarmFunction) -> None:
    try:
        with pytest.raises(FunctionError) as timed_out:
            function.invoke({"sleep": 5})
        assert timed_out.value.error_type == "Sandbox.Timedout"
        assert timed_out.value.error_message == "Task timed out after 1.00 seconds"
        assert function.invoke({})["calls"] == 1  # a cold start
    finally:
        function.stop()
