"""``<workspace>/deployed/endpoint.json`` (``lakeline up``): a live process's file names it and refuses a second
``up``; a dead process's file is stale and ignored; a process removes only the file it wrote."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from lakeline.runtimes.deployed import endpoint
from lakeline.runtimes.deployed.endpoint import AlreadyUp, NotAnswering, RunningEndpoint

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


# A stand-in for `lakeline up`: it claims the workspace as `up` does (the lock, the owner file), publishes its
# endpoint, answers HTTP on it, and on SIGTERM writes ``kept`` (its state) before it ends, or not, if told.
FAKE_UP = """
import http.server, json, os, signal, sys, threading, time
from pathlib import Path
from lakeline.project.engine_owner import claim
from lakeline.project.workspace import Workspace
from lakeline.runtimes.deployed import endpoint
from lakeline.runtimes.deployed.endpoint import RunningEndpoint
root, keep = Path(sys.argv[1]), sys.argv[2] == "keep"
claim(Workspace(root), "lakeline up")
print("claimed", flush=True)
time.sleep(float(sys.argv[4]))  # the stand-up
server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
threading.Thread(target=server.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{server.server_address[1]}"
endpoint.publish(root, RunningEndpoint(os.getpid(), url, "us-east-1", "AKIA", "secret", {}))
stop = threading.Event()
def stopping(*_):
    if stop.is_set():  # a second signal: `up` stops at once, keeping nothing
        (root / "signalled twice").write_text("")
        os._exit(1)
    stop.set()
signal.signal(signal.SIGTERM, stopping)
print("up", flush=True)
stop.wait()
time.sleep(float(sys.argv[3]))  # the work under way
if keep:
    (root / "kept").write_text("kept")
endpoint.withdraw(root)
"""


def _fake_up(
    root: Path, keep: bool, stopping_seconds: float = 0.0, standing_up_seconds: float = 0.0, *, wait: bool = True
) -> subprocess.Popen[str]:
    arguments = [str(root), "keep" if keep else "lose", str(stopping_seconds), str(standing_up_seconds)]
    process = subprocess.Popen([sys.executable, "-c", FAKE_UP, *arguments], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline() == "claimed\n"
    if wait:
        assert process.stdout.readline() == "up\n"
    return process


def _kept_at(root: Path) -> float | None:
    kept = root / "kept"
    return kept.stat().st_mtime if kept.exists() else None


@pytest.mark.parametrize("keep", [True, False])
def test_down_signals_the_up_holding_the_workspace_and_waits_for_it_to_give_it_up(tmp_path: Path, keep: bool) -> None:
    process = _fake_up(tmp_path, keep)
    try:
        assert endpoint.reachable(tmp_path) is not None
        stopped = endpoint.stop_up(tmp_path, lambda: _kept_at(tmp_path), timeout=30, poll=0.05)
        assert stopped is not None and stopped.endpoint.pid == process.pid and stopped.kept is keep
        # The claim is given up when the process ends, even before its parent reaps it.
        assert process.wait(timeout=5) == 0
        assert endpoint.stop_up(tmp_path, lambda: _kept_at(tmp_path), timeout=30) is None
    finally:
        process.kill()


def test_down_run_again_while_up_stops_waits_for_it_without_a_second_signal(tmp_path: Path) -> None:
    """A second signal stops `up` at once, keeping nothing: a `down` that timed out and is run again (or a
    second one from another terminal) waits for the stop already asked instead."""
    process = _fake_up(tmp_path, keep=True, stopping_seconds=3.0)
    try:
        with pytest.raises(endpoint.StillStopping, match="run `lakeline down` again"):
            endpoint.stop_up(tmp_path, lambda: _kept_at(tmp_path), timeout=0.5, poll=0.05)
        stopped = endpoint.stop_up(tmp_path, lambda: _kept_at(tmp_path), timeout=30, poll=0.05)
        assert process.wait(timeout=5) == 0 and not (tmp_path / "signalled twice").exists()
        assert stopped is not None and (tmp_path / "kept").exists()
        # The next `up` on the workspace is asked to stop afresh.
        later = _fake_up(tmp_path, keep=True)
        try:
            assert endpoint.stop_up(tmp_path, lambda: _kept_at(tmp_path), timeout=30, poll=0.05) is not None
        finally:
            later.kill()
    finally:
        process.kill()


def test_down_leaves_a_live_pid_that_does_not_hold_the_workspace_alone(tmp_path: Path) -> None:
    # A stale endpoint file whose pid a program that is not `up` now has: it is not signalled.
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as other:
        try:
            endpoint.publish(tmp_path, replace(UP, pid=other.pid))
            assert endpoint.stop_up(tmp_path, lambda: None, timeout=5) is None
            assert other.poll() is None
        finally:
            other.kill()


def test_an_up_whose_endpoint_does_not_answer_is_named(tmp_path: Path) -> None:
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as other:
        try:
            with socket.socket() as probe:  # a port nothing listens on once closed
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            endpoint.publish(tmp_path, replace(UP, pid=other.pid, url=f"http://127.0.0.1:{port}"))
            with pytest.raises(
                NotAnswering, match=rf"\(pid {other.pid}\) .* its endpoint http://127.0.0.1:{port} does not answer"
            ):
                endpoint.reachable(tmp_path)
        finally:
            other.kill()
    assert endpoint.reachable(tmp_path) is None  # its process gone: none runs


def test_down_during_the_stand_up_waits_for_the_endpoint_then_stops_it(tmp_path: Path) -> None:
    """`up` holds the workspace from its start but publishes its endpoint only once the deployment stands: a
    `down` in between waits for it and stops it, instead of saying that none runs."""
    process = _fake_up(tmp_path, keep=True, standing_up_seconds=2.0, wait=False)
    try:
        assert endpoint.running(tmp_path) is None
        with pytest.raises(endpoint.StillStopping, match="still standing the deployment"):
            endpoint.stop_up(tmp_path, lambda: _kept_at(tmp_path), timeout=0.2, poll=0.05)
        stopped = endpoint.stop_up(tmp_path, lambda: _kept_at(tmp_path), timeout=30, poll=0.05)
        assert stopped is not None and stopped.endpoint.pid == process.pid and stopped.kept
        assert process.wait(timeout=5) == 0
    finally:
        process.kill()
