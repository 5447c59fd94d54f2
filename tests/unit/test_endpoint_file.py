"""``<workspace>/deployed/endpoint.json`` (``lakeline up``): a live process's file names it and refuses a second
``up``; a dead process's file is stale and ignored; a process removes only the file it wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from lakeline.operations import endpoint
from lakeline.operations.endpoint import AlreadyUp, RunningEndpoint

UP = RunningEndpoint(
    pid=0,
    url="http://127.0.0.1:4566",
    region="us-east-1",
    access_key_id="AKIAEXAMPLE",
    secret_access_key="secret",
    resources={"raw_bucket": "raw"},
)


def _ended_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_live_process_s_endpoint_refuses_a_second_up_naming_it(tmp_path: Path) -> None:
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as other:
        try:
            endpoint.publish(tmp_path, replace(UP, pid=other.pid))
            assert endpoint.running(tmp_path) == replace(UP, pid=other.pid)
            with pytest.raises(
                AlreadyUp, match=rf"already up at http://127.0.0.1:4566 \(`lakeline up`, pid {other.pid}\)"
            ):
                endpoint.refuse_if_up(tmp_path)
            endpoint.withdraw(tmp_path)  # not this process's file: left
            assert endpoint.endpoint_file(tmp_path).is_file()
        finally:
            other.kill()


def test_a_dead_process_s_endpoint_is_stale_and_ignored(tmp_path: Path) -> None:
    endpoint.publish(tmp_path, replace(UP, pid=_ended_pid()))
    assert endpoint.running(tmp_path) is None
    endpoint.refuse_if_up(tmp_path)
    endpoint.endpoint_file(tmp_path).write_text("{half")
    assert endpoint.running(tmp_path) is None


def test_a_process_withdraws_its_own_endpoint(tmp_path: Path) -> None:
    endpoint.publish(tmp_path, replace(UP, pid=os.getpid()))
    assert endpoint.running(tmp_path) is None  # its own: not another `up`
    endpoint.withdraw(tmp_path)
    assert not endpoint.endpoint_file(tmp_path).exists()


def test_the_exports_reach_the_endpoint_as_the_operator() -> None:
    assert UP.exports() == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:4566",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "secret",
    }
