"""One process at a time owns a workspace's embedded Spark: a second command is told which one does,
and a ``lakeline sql`` server holding it is asked to give it up."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeline.project import engine_owner
from lakeline.project.engine_owner import SQL_SERVER, WorkspaceBusy, claim, current_owner
from lakeline.project.workspace import Workspace

HOLDER = """
import sys, time
from pathlib import Path
from lakeline.project.engine_owner import claim
from lakeline.project.workspace import Workspace
claim(Workspace.at(Path(sys.argv[1])), sys.argv[2])
print("claimed", flush=True)
time.sleep(120)
"""


@pytest.fixture(autouse=True)
def _forget_claims() -> Iterator[None]:
    """Claims last as long as their process; each test starts with none."""
    yield
    for handle in engine_owner._held.values():
        handle.close()
    engine_owner._held.clear()


def hold(workspace: Workspace, command: str) -> subprocess.Popen[str]:
    """Another process that claims the workspace as ``command`` and keeps it."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(workspace.root), command], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "claimed\n"
    return holder


def test_a_second_process_is_told_which_command_holds_the_workspace(tmp_path: Path) -> None:
    workspace = Workspace.at(tmp_path / "ws")
    holder = hold(workspace, "lakeline watch")
    try:
        with pytest.raises(WorkspaceBusy, match=rf"in use by `lakeline watch` \(pid {holder.pid}\)"):
            claim(workspace, "lakeline run", stop_server=lambda _: pytest.fail("only a SQL server is stopped"))
    finally:
        holder.kill()
        holder.wait()
    # The kernel releases the claim of a process that ended, however it ended.
    claim(workspace, "lakeline run")
    assert current_owner(workspace) == engine_owner.Owner(engine_owner.os.getpid(), "lakeline run")


def test_a_sql_server_holding_the_workspace_is_stopped_and_the_claim_taken(tmp_path: Path) -> None:
    workspace = Workspace.at(tmp_path / "ws")
    server = hold(workspace, SQL_SERVER)
    stopped: list[Path] = []

    def stop_server(stopping: Workspace) -> None:
        stopped.append(stopping.root)
        server.terminate()  # what the server does when asked: finish, then end

    try:
        started = time.monotonic()
        claim(workspace, "lakeline run", stop_server=stop_server)
    finally:
        server.kill()
        server.wait()
    assert stopped == [workspace.root]
    assert time.monotonic() - started < 30
    assert current_owner(workspace) is not None and current_owner(workspace).command == "lakeline run"  # type: ignore[union-attr]


def test_a_process_claims_its_workspace_once(tmp_path: Path) -> None:
    workspace = Workspace.at(tmp_path / "ws")
    claim(workspace, "lakeline run")
    claim(workspace, "lakeline run")  # a second engine in the same process: its own claim stands
    holder = subprocess.run(
        [sys.executable, "-c", HOLDER, str(workspace.root), "lakeline sql server"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert holder.returncode != 0 and "in use by `lakeline run`" in holder.stderr
