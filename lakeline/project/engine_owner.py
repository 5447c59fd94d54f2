"""One process at a time owns a workspace's embedded Spark.

The metastore is embedded Derby, which admits one JVM: a second command on the same workspace used to
print pages of Java stack (``Another instance of Derby may have already booted the database``) and go
on without its catalog. So a process claims the workspace (an exclusive ``flock`` on
``metastore/lakeline.lock``, released by the kernel when the process ends, even on a crash) and says
who it is (``state/engine-owner.json``) before it starts Spark. A second command is told which
command holds the workspace; the ``lakeline sql`` server, which only keeps Spark warm between queries,
is asked to stop and gives the workspace up.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from lakeline.errors import LakelineError
from lakeline.project.workspace import Workspace, write_json

# The command name the SQL server claims a workspace with: a claim held by it may be taken over.
SQL_SERVER = "lakeline sql server"

# A process keeps its claims until it ends (one SparkSession per process, its metastore fixed at start).
_held: dict[Path, IO[str]] = {}


class WorkspaceBusy(LakelineError):
    """Another process owns the workspace's embedded Spark."""


@dataclass(frozen=True)
class Owner:
    pid: int
    command: str


def lock_file(workspace: Workspace) -> Path:
    return workspace.root / "metastore" / "lakeline.lock"


def owner_file(workspace: Workspace) -> Path:
    return workspace.root / "state" / "engine-owner.json"


def this_command() -> str:
    """What this process is, as the user typed it: ``lakeline run``, ``lakeline watch`` …"""
    words = [Path(sys.argv[0]).name if sys.argv else "python", *sys.argv[1:2]]
    if words[0] in {"__main__.py", "-m"}:
        words[0] = "lakeline"
    return " ".join(words)


def current_owner(workspace: Workspace) -> Owner | None:
    try:
        record = json.loads(owner_file(workspace).read_text())
        return Owner(int(record["pid"]), str(record["command"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _try_lock(handle: IO[str]) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def claim(
    workspace: Workspace,
    command: str | None = None,
    *,
    stop_server: Callable[[Workspace], object] | None = None,
    wait: float = 60.0,
) -> None:
    """Own the workspace's embedded Spark for the rest of this process, or raise ``WorkspaceBusy``
    naming the command that owns it. A ``lakeline sql`` server owning it is stopped (``stop_server``)."""
    root = workspace.root
    if root in _held:
        return
    path = lock_file(workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a")
    try:
        deadline = time.monotonic() + wait
        stopped: set[int] = set()
        while not _try_lock(handle):
            owner = current_owner(workspace)
            if owner is not None and owner.command == SQL_SERVER and stop_server is not None:
                if owner.pid not in stopped:
                    stop_server(workspace)  # it ends its statement first: the wait starts after
                    stopped.add(owner.pid)
                    deadline = time.monotonic() + wait
            else:
                who = f"`{owner.command}` (pid {owner.pid})" if owner else "another process"
                raise WorkspaceBusy(
                    f"the workspace {root} is in use by {who}: its embedded Spark admits one process at a time; "
                    "wait for it to finish or stop it, then run this again"
                )
            if time.monotonic() > deadline:
                raise WorkspaceBusy(f"the workspace {root} was not given up within {wait:.0f}s")
            time.sleep(0.2)
    except BaseException:
        handle.close()
        raise
    _held[root] = handle
    write_json(owner_file(workspace), {"pid": os.getpid(), "command": command or this_command()})


def held_by_another(root: Path) -> bool:
    """Whether another process holds the claim on the workspace at ``root`` now (the kernel releases it when
    that process ends, even before its parent reaps it)."""
    if root in _held:
        return False
    try:
        handle = lock_file(Workspace(root)).open("r")
    except FileNotFoundError:
        return False
    with handle:
        if not _try_lock(handle):
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False
