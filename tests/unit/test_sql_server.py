"""The workspace's SQL server, with an engine that stands in for Spark (the real one is in
``tests/e2e/test_example_project.py``): it outlives clients that go away and engine failures, stops
when asked after the statement it runs, stops when idle, and never signals a process that is not it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeline.errors import LakelineError
from lakeline.project import sql_server
from lakeline.project.sql_server import read_record, record_file
from lakeline.project.workspace import Workspace

# The command line names the module and the workspace, as the real server's does (``stop`` checks).
SERVER = """
import sys, time
from pathlib import Path
from lakeline.engines.base import QueryResult
from lakeline.project.sql_server import _Server, _write_record
from lakeline.project.workspace import Workspace

class StandIn:
    def execute(self, statement):
        if statement.startswith("sleep "):
            time.sleep(float(statement.split()[1]))
        if statement == "boom":
            raise RuntimeError("boom\\n\\tat org.apache.spark.Something(Java stack)")
        return QueryResult(query_id="q", columns=["said"], rows=[(statement,)])

workspace = Workspace.at(Path(sys.argv[2]))
_write_record(workspace, "", [], "embedded")
_Server(workspace, float(sys.argv[3])).serve(StandIn(), ["a note"], "embedded")
"""


def alive(process: subprocess.Popen[bytes]) -> bool:
    return process.poll() is None


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace.at(tmp_path / "ws")


def start(workspace: Workspace, keep_seconds: float = 600) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, "lakeline.project.sql_server", str(workspace.root), str(keep_seconds)]
    )
    deadline = time.monotonic() + 30
    while not (read_record(workspace) and read_record(workspace).address):  # type: ignore[union-attr]
        assert time.monotonic() < deadline and alive(server)
        time.sleep(0.05)
    return server


@pytest.fixture
def server(workspace: Workspace) -> Iterator[subprocess.Popen[bytes]]:
    process = start(workspace)
    yield process
    process.kill()
    process.wait()


def test_it_outlives_a_client_that_goes_away_and_an_engine_failure(
    workspace: Workspace, server: subprocess.Popen[bytes]
) -> None:
    client = sql_server.connect(workspace, keep_minutes=10)
    assert not client.started and client.execute("SELECT 1").rows == [("SELECT 1",)]
    # A client pressed Ctrl-C during its statement: the reply has nowhere to go.
    gone = sql_server.connect(workspace, keep_minutes=10)
    gone.connection.send(sql_server.Request("execute", "sleep 0.5"))
    gone.close()
    time.sleep(1)
    with pytest.raises(LakelineError, match=r"^RuntimeError: boom$"):
        client.execute("boom")  # the engine's own failure: one line, not its stack
    assert client.execute("still here").rows == [("still here",)] and alive(server)


def test_stop_lets_the_running_statement_finish_then_ends_it(
    workspace: Workspace, server: subprocess.Popen[bytes]
) -> None:
    client = sql_server.connect(workspace, keep_minutes=10)
    answers: list[object] = []
    asking = threading.Thread(target=lambda: answers.append(client.execute("sleep 2").rows))
    asking.start()
    time.sleep(0.5)
    started = time.monotonic()
    assert sql_server.stop(workspace)
    asking.join(10)
    assert answers == [[("sleep 2",)]]
    assert 1 < time.monotonic() - started < 20
    assert server.wait(5) is not None and not record_file(workspace).exists()
    assert not sql_server.stop(workspace)  # nothing left to stop


def test_it_stops_by_itself_when_idle(workspace: Workspace) -> None:
    server = start(workspace, keep_seconds=1)
    try:
        assert server.wait(15) == 0
    finally:
        server.kill()
    assert not record_file(workspace).exists()


def test_a_record_left_by_a_server_that_died_never_signals_the_process_that_got_its_pid(
    workspace: Workspace,
) -> None:
    stranger = subprocess.Popen(["sleep", "30"])
    try:
        record_file(workspace).parent.mkdir(parents=True, exist_ok=True)
        record_file(workspace).write_text(json.dumps({"pid": stranger.pid, "address": "/nowhere", "notes": []}))
        assert not sql_server.stop(workspace)
        assert alive(stranger) and not record_file(workspace).exists()
    finally:
        stranger.kill()
        stranger.wait()


STAND_IN_SERVER = """
from contextlib import contextmanager

import sqlglot

from lakeline.engines.base import QueryResult
from lakeline.project import sql_server


class StandIn:
    def execute(self, statement):
        sqlglot.parse(statement, read="athena")  # logs "contains unsupported syntax" for a SHOW CREATE TABLE
        return QueryResult("q", ["n"], [(1,)])


@contextmanager
def opening(arguments, workspace, notes):
    yield StandIn()


sql_server.serve(None, sql_server.EMBEDDED, opening, "stand-in")
"""


def test_a_server_keeps_library_log_lines_in_the_workspace_log_not_in_its_output(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sqlglot's warnings in the server's process went to its output, Python's last resort (#36)."""
    import os

    (tmp_path / "stand_in_sql_server.py").write_text(STAND_IN_SERVER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    client = sql_server.connect(
        workspace, keep_minutes=1, waiting=lambda: None, mode=sql_server.EMBEDDED, command=["stand_in_sql_server"]
    )
    try:
        assert client.execute("SHOW CREATE TABLE a.b").rows == [(1,)]
    finally:
        sql_server.stop(workspace)
    assert "unsupported syntax" not in sql_server.log_file(workspace).read_text()
    assert "unsupported syntax" in (workspace.root / "state" / "lakeline.log").read_text()
