"""``lakeline sql`` without Spark's start on every call: one server per workspace keeps it running.

Starting the embedded Spark costs 10 to 60 s, and the workspace's Derby metastore admits one process. So
the first ``lakeline sql`` on a workspace starts this server in the background (``python -m
lakeline.local.sql_server``): it claims the workspace (``engine_owner``), opens the engine as any
command does (relocated if the workspace moved) and answers statements until it has been idle for
its keep time, or until another command needs the workspace: that command stops it
(``engine_owner.claim``). Statements run on the same ``SparkEngine`` as everywhere else, so what the
server answers is what ``lakeline sql --no-server`` answers.

Requests travel over a Unix socket with ``multiprocessing.connection``: length-framed pickles,
authenticated with a key only the workspace's owner can read (``state/sql-server.key``, mode 0600).
The server says where it listens in ``state/sql-server.json`` once it is ready; its output goes to
``state/sql-server.log``.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import Any

from lakeline.engines.base import QueryError, QueryResult
from lakeline.errors import LakelineError
from lakeline.local.engine_owner import SQL_SERVER
from lakeline.local.workspace import Workspace, write_json

DEFAULT_KEEP_MINUTES = 15.0
START_TIMEOUT = 300.0  # seconds for a cold Spark on a slow machine
STOP_TIMEOUT = 60.0


class ServerUnavailable(LakelineError):
    """The workspace's SQL server could not be started or reached."""


def record_file(workspace: Workspace) -> Path:
    return workspace.root / "state" / "sql-server.json"


def key_file(workspace: Workspace) -> Path:
    return workspace.root / "state" / "sql-server.key"


def log_file(workspace: Workspace) -> Path:
    return workspace.root / "state" / "sql-server.log"


def _socket_address(workspace: Workspace) -> str:
    """A Unix socket path short enough for the kernel's 107 bytes, wherever the workspace is."""
    digest = hashlib.sha256(str(workspace.root).encode()).hexdigest()[:16]
    return str(Path(tempfile.gettempdir()) / f"lakeline-{os.getuid()}-{digest}.sock")


@dataclass(frozen=True)
class Request:
    op: str  # "execute", "stop"
    statement: str = ""


@dataclass(frozen=True)
class Reply:
    result: QueryResult | None = None
    error: str | None = None
    query_error: bool = False  # the statement failed (exit 1), not the request (exit 2)


@dataclass(frozen=True)
class ServerRecord:
    pid: int
    address: str
    notes: list[str] = field(default_factory=list)  # what opening the workspace said (a move)


def read_record(workspace: Workspace) -> ServerRecord | None:
    try:
        record = json.loads(record_file(workspace).read_text())
        return ServerRecord(int(record["pid"]), str(record["address"]), [str(note) for note in record["notes"]])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def _spawn_lock(workspace: Workspace) -> Iterator[None]:
    """Two ``lakeline sql`` started at once start one server between them."""
    path = workspace.root / "state" / "sql-server.spawn.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _connect(workspace: Workspace, record: ServerRecord) -> Connection:
    return Client(record.address, family="AF_UNIX", authkey=key_file(workspace).read_bytes())


class SqlClient:
    """A connection to the workspace's SQL server."""

    def __init__(self, connection: Connection, record: ServerRecord, started: bool) -> None:
        self.connection = connection
        self.record = record
        self.started = started  # this call started the server (its notes are news)

    def execute(self, statement: str) -> QueryResult:
        self.connection.send(Request("execute", statement))
        reply: Reply = self.connection.recv()
        if reply.error is not None:
            if reply.query_error:
                raise QueryError(reply.error, sql=statement)
            raise LakelineError(reply.error)
        assert reply.result is not None
        return reply.result

    def close(self) -> None:
        self.connection.close()


def _reach(workspace: Workspace) -> tuple[Connection, ServerRecord] | None:
    record = read_record(workspace)
    if record is None or not _alive(record.pid):
        return None
    try:
        return _connect(workspace, record), record
    except OSError:
        return None


def connect(workspace: Workspace, *, keep_minutes: float, waiting: Callable[[], None] = lambda: None) -> SqlClient:
    """The workspace's SQL server, started first if none is running (``waiting`` is told)."""
    reached = _reach(workspace)
    if reached is not None:
        return SqlClient(*reached, started=False)
    with _spawn_lock(workspace):
        reached = _reach(workspace)  # another call may have started it meanwhile
        if reached is not None:
            return SqlClient(*reached, started=False)
        waiting()
        _start(workspace, keep_minutes)
        reached = _reach(workspace)
        if reached is None:
            raise ServerUnavailable(f"the SQL server of {workspace.root} started but cannot be reached")
        return SqlClient(*reached, started=True)


def _start(workspace: Workspace, keep_minutes: float) -> None:
    record_file(workspace).unlink(missing_ok=True)
    log = log_file(workspace)
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "lakeline.local.sql_server", str(workspace.root), "--keep", str(keep_minutes)]
    if workspace.raw is not None:
        command += ["--raw", str(workspace.raw)]
    with log.open("w") as output:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + START_TIMEOUT
    while read_record(workspace) is None:
        if process.poll() is not None:
            raise ServerUnavailable(_why_it_ended(log))
        if time.monotonic() > deadline:
            process.kill()
            raise ServerUnavailable(f"the SQL server did not start within {START_TIMEOUT:.0f}s; its output: {log}")
        time.sleep(0.1)


def _why_it_ended(log: Path) -> str:
    """The server's own one-line reason (it writes ``error: …`` last), else where its output is."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    reasons = [line.removeprefix("error: ") for line in lines if line.startswith("error: ")]
    return reasons[-1] if reasons else f"the SQL server stopped while starting; its output: {log}"


def stop(workspace: Workspace) -> bool:
    """Stop the workspace's SQL server if one runs; True if one did. It finishes the statement it runs."""
    record = read_record(workspace)
    if record is None or not _alive(record.pid):
        return False
    try:
        with _connect(workspace, record) as connection:
            connection.send(Request("stop"))
            connection.recv()
    except Exception:  # stopping already, not listening, or a reply of another version:
        pass  # waiting for it to end is all there is left to do
    deadline = time.monotonic() + STOP_TIMEOUT
    while _alive(record.pid):
        if time.monotonic() > deadline:
            os.kill(record.pid, 15)
            break
        time.sleep(0.1)
    return True


class _Server:
    def __init__(self, workspace: Workspace, keep_seconds: float) -> None:
        self.workspace = workspace
        self.keep_seconds = keep_seconds
        self.last_used = time.monotonic()
        self.busy = False
        self.stopping = threading.Event()

    def serve(self, engine: Any, notes: list[str]) -> None:
        address = _socket_address(self.workspace)
        Path(address).unlink(missing_ok=True)
        key = secrets.token_bytes(32)
        key_path = key_file(self.workspace)
        key_path.unlink(missing_ok=True)
        key_path.touch(mode=0o600)
        key_path.write_bytes(key)
        previous = os.umask(0o077)  # the socket: its owner only
        try:
            listener = Listener(address, family="AF_UNIX", authkey=key)
        finally:
            os.umask(previous)
        with listener:
            write_json(record_file(self.workspace), {"pid": os.getpid(), "address": address, "notes": notes})
            threading.Thread(target=self._stop_when_idle, args=(address, key), daemon=True).start()
            while not self.stopping.is_set():
                try:
                    connection = listener.accept()
                except (OSError, EOFError, AuthenticationError):
                    continue  # a client that failed the handshake or went away during it
                with connection:
                    self._answer(connection, engine)
        record_file(self.workspace).unlink(missing_ok=True)

    def _answer(self, connection: Connection, engine: Any) -> None:
        while not self.stopping.is_set():
            try:
                request: Request = connection.recv()
            except (EOFError, OSError):
                return
            if request.op == "stop":
                self.stopping.set()
                connection.send(Reply())
                return
            self.busy = True
            try:
                connection.send(_run(engine, request.statement))
            finally:
                self.busy = False
                self.last_used = time.monotonic()

    def _stop_when_idle(self, address: str, key: bytes) -> None:
        while not self.stopping.wait(5):
            if not self.busy and time.monotonic() - self.last_used > self.keep_seconds:
                with Client(address, family="AF_UNIX", authkey=key) as connection:
                    connection.send(Request("stop"))
                return


def _run(engine: Any, statement: str) -> Reply:
    try:
        return Reply(result=engine.execute(statement))
    except QueryError as error:
        return Reply(error=str(error), query_error=True)
    except LakelineError as error:
        return Reply(error=str(error))


def main(argv: list[str] | None = None) -> None:
    from lakeline.local.engine_owner import claim
    from lakeline.local.relocation import open_engine

    parser = argparse.ArgumentParser(prog="python -m lakeline.local.sql_server")
    parser.add_argument("root", type=Path)
    parser.add_argument("--raw", type=Path)
    parser.add_argument("--keep", type=float, default=DEFAULT_KEEP_MINUTES, help="minutes to stay when idle")
    arguments = parser.parse_args(argv)
    workspace = Workspace.at(arguments.root, arguments.raw)
    notes: list[str] = []
    try:
        claim(workspace, SQL_SERVER, stop_server=stop)  # one this call could not reach gives way
        engine = open_engine(workspace, notes.append)
    except LakelineError as error:
        print(f"error: {error}", flush=True)
        raise SystemExit(2) from error
    try:
        _Server(workspace, arguments.keep * 60).serve(engine, notes)
    finally:
        engine.session.stop()  # the metastore shuts down cleanly before the workspace is given up


if __name__ == "__main__":
    # Run from the module by its own name, so the replies it pickles name ``lakeline.local.sql_server``
    # classes that the client can find (not ``__main__``'s).
    from lakeline.local.sql_server import main as serve_workspace

    serve_workspace()
