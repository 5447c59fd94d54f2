"""``lakeline sql`` without Spark's start on every call: one server per workspace keeps it running.

Starting the embedded Spark costs 10 to 60 s, and the workspace's Derby metastore admits one process. So
the first ``lakeline sql`` on a workspace starts this server in the background (``python -m
lakeline.project.sql_server``): it claims the workspace (``engine_owner``), opens the engine as any
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
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import Any

from lakeline import logs
from lakeline.engines.base import QueryError, QueryResult
from lakeline.errors import LakelineError
from lakeline.project.engine_owner import SQL_SERVER
from lakeline.project.workspace import Workspace, write_json

DEFAULT_KEEP_MINUTES = 15.0
START_TIMEOUT = 300.0  # seconds for a cold Spark on a slow machine
STOP_TIMEOUT = 60.0
DEPLOYED_STOP_TIMEOUT = 3600.0


class ServerUnavailable(LakelineError):
    """The workspace's SQL server could not be started or reached."""


def record_file(workspace: Workspace) -> Path:
    return workspace.root / "state" / "sql-server.json"


def key_file(workspace: Workspace) -> Path:
    return workspace.root / "state" / "sql-server.key"


def log_file(workspace: Workspace) -> Path:
    return workspace.root / "state" / "sql-server.log"


def _socket_address(workspace: Workspace) -> str:
    """A Unix socket path short enough for the kernel's 107 bytes, wherever the workspace is, in a
    folder of the user's own (another user cannot put a file where the socket goes)."""
    folder = Path(tempfile.gettempdir()) / f"lakeline-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    if folder.is_symlink() or folder.stat().st_uid != os.getuid() or folder.stat().st_mode & 0o077:
        raise ServerUnavailable(f"{folder} must be a folder of your own that only you can open")
    digest = hashlib.sha256(str(workspace.root).encode()).hexdigest()[:16]
    return str(folder / f"{digest}.sock")


@dataclass(frozen=True)
class Request:
    op: str  # "execute", "stop"
    statement: str = ""


@dataclass(frozen=True)
class Reply:
    result: QueryResult | None = None
    error: str | None = None
    query_error: bool = False  # the statement failed (exit 1), not the request (exit 2)


EMBEDDED, DEPLOYED = "embedded", "deployed"  # what a server answers on: the workspace's Spark, or its deployment


@dataclass(frozen=True)
class ServerRecord:
    pid: int
    address: str
    notes: list[str] = field(default_factory=list)  # what opening the workspace said (a move)
    mode: str = EMBEDDED


def _cmdline(pid: int) -> str:
    """The command line of a process ("" if it is gone), to tell our server from a process that got
    its pid after it ended."""
    proc = Path(f"/proc/{pid}/cmdline")
    if proc.parent.parent.is_dir() and Path("/proc/self").exists():
        try:
            return proc.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return ""
    listed = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, check=False)
    return listed.stdout.strip()


def server_pid(workspace: Workspace) -> int | None:
    """The pid of the workspace's SQL server, starting or ready, if one runs."""
    record = read_record(workspace)
    if record is None:
        return None
    command = _cmdline(record.pid)
    # This module or a server built on it, for this workspace exactly (not one whose path begins with it).
    if "sql_server" in command and f" {workspace.root} " in f" {command} ":
        return record.pid
    record_file(workspace).unlink(missing_ok=True)  # it ended without a word (killed, a reboot)
    return None


def read_record(workspace: Workspace) -> ServerRecord | None:
    try:
        record = json.loads(record_file(workspace).read_text())
        notes = [str(note) for note in record["notes"]]
        return ServerRecord(int(record["pid"]), str(record["address"]), notes, str(record.get("mode", EMBEDDED)))
    except (OSError, ValueError, KeyError, TypeError):
        return None


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

    def __init__(self, workspace: Workspace, connection: Connection, record: ServerRecord, started: bool) -> None:
        self.workspace = workspace
        self.connection = connection
        self.record = record
        self.started = started  # this call started the server (its notes are news)

    def execute(self, statement: str) -> QueryResult:
        try:
            self.connection.send(Request("execute", statement))
            reply: Reply = self.connection.recv()
        except (OSError, EOFError) as error:
            raise ServerUnavailable(
                f"the SQL server stopped during the statement; its output: {log_file(self.workspace)}"
            ) from error
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
    if record is None or not record.address or server_pid(workspace) is None:
        return None  # none, still starting, or gone
    try:
        return _connect(workspace, record), record
    except (OSError, EOFError, AuthenticationError):
        return None


def connect(
    workspace: Workspace,
    *,
    keep_minutes: float,
    waiting: Callable[[], None] = lambda: None,
    mode: str = EMBEDDED,
    command: Sequence[str] = (),
) -> SqlClient:
    """The workspace's SQL server answering on ``mode``, started first if none is running (``waiting`` is
    told); one answering on the other is stopped first. ``command``: the module and arguments that serve
    ``mode`` (``python -m`` of this module, for the embedded Spark)."""
    reached = _reach(workspace)
    if reached is not None and reached[1].mode == mode:
        return SqlClient(workspace, *reached, started=False)
    with _spawn_lock(workspace):
        reached = _reach(workspace)  # another call may have started it meanwhile
        if reached is not None and reached[1].mode == mode:
            return SqlClient(workspace, *reached, started=False)
        if reached is not None:
            reached[0].close()
            stop(workspace)
        waiting()
        _start(workspace, keep_minutes, command or ["lakeline.project.sql_server"])
        reached = _reach(workspace)
        if reached is None:
            raise ServerUnavailable(f"the SQL server of {workspace.root} started but cannot be reached")
        return SqlClient(workspace, *reached, started=True)


def _start(workspace: Workspace, keep_minutes: float, serving: Sequence[str]) -> None:
    log = log_file(workspace)
    log.parent.mkdir(parents=True, exist_ok=True)
    module, *arguments = serving
    command = [sys.executable, "-m", module, str(workspace.root), "--keep", str(keep_minutes), *arguments]
    if workspace.raw is not None:
        command += ["--raw", str(workspace.raw)]
    with log.open("w") as output:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while True:
            record = read_record(workspace)
            if record is not None and record.pid == process.pid and record.address:
                return
            if process.poll() is not None:
                raise ServerUnavailable(_why_it_ended(log))
            if time.monotonic() > deadline:
                raise ServerUnavailable(f"the SQL server did not start within {START_TIMEOUT:.0f}s; its output: {log}")
            time.sleep(0.1)
    except BaseException:  # Ctrl-C too: a server this call started and gave up on does not stay
        process.terminate()
        raise


def _why_it_ended(log: Path) -> str:
    """The server's own one-line reason (it writes ``error: …`` last), else where its output is."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    reasons = [line.removeprefix("error: ") for line in lines if line.startswith("error: ")]
    return reasons[-1] if reasons else f"the SQL server stopped while starting; its output: {log}"


def stop(workspace: Workspace) -> bool:
    """Stop the workspace's SQL server if one runs (starting or ready); True if one did. It finishes
    the statement it runs first, for up to ``STOP_TIMEOUT`` seconds."""
    pid = server_pid(workspace)
    if pid is None:
        return False
    record = read_record(workspace)
    # A statement on the deployment waits for what it set going (stage A and B runs) and keeps the state
    # after: it is given as long as the deployment's own commands give their work.
    patience = DEPLOYED_STOP_TIMEOUT if record is not None and record.mode == DEPLOYED else STOP_TIMEOUT
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + patience
    while _cmdline(pid):  # gone (or a zombie, whose command line is empty)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)  # its JVM ends with it (PySpark's gateway exits when its stdin closes)
            deadline = time.monotonic() + patience
        time.sleep(0.1)
    return True


class _Stop(Exception):
    """SIGTERM: asked to stop (``stop``, the idle watch, a ``stop`` request)."""


class _Server:
    """Answers each connection on a thread of its own, one statement at a time on the engine; stops on
    SIGTERM, which breaks the accept loop and waits for the statement running to finish."""

    def __init__(self, workspace: Workspace, keep_seconds: float) -> None:
        self.workspace = workspace
        self.keep_seconds = keep_seconds
        self.last_used = time.monotonic()
        self.running = 0
        self.stopping = False
        self.engine_lock = threading.Lock()

    def serve(self, engine: Any, notes: list[str], mode: str) -> None:
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

        def asked_to_stop(signum: int, frame: object) -> None:
            raise _Stop

        signal.signal(signal.SIGTERM, asked_to_stop)
        try:
            with listener:
                _write_record(self.workspace, address, notes, mode)
                threading.Thread(target=self._stop_when_idle, daemon=True).start()
                while True:
                    try:
                        connection = listener.accept()
                    except (OSError, EOFError, AuthenticationError):
                        continue  # a client that failed the handshake or went away during it
                    threading.Thread(target=self._answer, args=(connection, engine), daemon=True).start()
        except _Stop:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends it at once
            self.stopping = True
            while self.running:  # the statement running finishes and is answered; no other starts
                time.sleep(0.05)
        finally:
            record_file(self.workspace).unlink(missing_ok=True)

    def _answer(self, connection: Connection, engine: Any) -> None:
        with connection:
            while True:
                try:
                    request: Request = connection.recv()
                    if request.op == "stop":
                        connection.send(Reply())
                        os.kill(os.getpid(), signal.SIGTERM)
                        return
                    self.running += 1
                    try:
                        with self.engine_lock:
                            reply = (
                                Reply(error="the SQL server is stopping")
                                if self.stopping
                                else _run(engine, request.statement)
                            )
                        connection.send(reply)
                    finally:
                        self.running -= 1
                        self.last_used = time.monotonic()
                except (OSError, EOFError):
                    return  # the client went away (Ctrl-C): the next one is answered as usual

    def _stop_when_idle(self) -> None:
        while True:
            time.sleep(min(5.0, self.keep_seconds / 4))
            if not self.running and time.monotonic() - self.last_used > self.keep_seconds:
                os.kill(os.getpid(), signal.SIGTERM)
                return


def _write_record(workspace: Workspace, address: str, notes: list[str], mode: str) -> None:
    """``address`` "" while Spark starts (``stop`` finds it), the socket once it answers."""
    write_json(record_file(workspace), {"pid": os.getpid(), "address": address, "notes": notes, "mode": mode})


def _run(engine: Any, statement: str) -> Reply:
    try:
        return Reply(result=engine.execute(statement))
    except QueryError as error:
        return Reply(error=str(error), query_error=True)
    except LakelineError as error:
        return Reply(error=str(error))
    except Exception as error:  # the engine's own failure (Py4J, memory): one line, and the server stays
        first = (str(error).strip().splitlines() or [""])[0]
        return Reply(error=f"{type(error).__name__}: {first}")


Opening = Callable[[argparse.Namespace, Workspace, list[str]], AbstractContextManager[Any]]
"""What a server answers with, opened on the workspace with the server's arguments (``notes`` told what
opening it said): anything with ``execute(statement) -> QueryResult`` that raises ``QueryError`` for a
failed statement."""


def serve(argv: list[str] | None, mode: str, opening: Opening, prog: str) -> None:
    """A server's process: its arguments (the workspace, ``--raw``, ``--keep`` and the ``mode``'s own), the
    workspace claimed, what ``opening`` opens served until it is stopped or idle, then closed."""
    from lakeline.project.engine_owner import claim

    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("root", type=Path)
    parser.add_argument("--raw", type=Path)
    parser.add_argument("--keep", type=float, default=DEFAULT_KEEP_MINUTES, help="minutes to stay when idle")
    parser.add_argument("--config", type=Path, help="the project's lakeline.yml (deployed)")
    arguments = parser.parse_args(argv)
    # Libraries' log lines (sqlglot's "contains unsupported syntax ...") go to the workspace's log, as a
    # command's do, not to this process's output, which a failed start shows (#36).
    logs.capture()
    workspace = Workspace.at(arguments.root, arguments.raw)
    logs.to_workspace(workspace.root)
    notes: list[str] = []
    with ExitStack() as opened:
        try:
            claim(workspace, SQL_SERVER, stop_server=stop)  # one this call could not reach gives way
            _write_record(workspace, "", [], mode)  # starting: `stop` and other commands can find it already
            engine = opened.enter_context(opening(arguments, workspace, notes))
        except LakelineError as error:
            record_file(workspace).unlink(missing_ok=True)
            print(f"error: {error}", flush=True)
            raise SystemExit(2) from error
        _Server(workspace, arguments.keep * 60).serve(engine, notes, mode)


@contextmanager
def _embedded_spark(_arguments: argparse.Namespace, workspace: Workspace, notes: list[str]) -> Iterator[Any]:
    from lakeline.project.relocation import open_engine

    engine = open_engine(workspace, notes.append)
    try:
        yield engine
    finally:
        # Spark's own shutdown; the JVM, and Derby with it, ends when this process does (PySpark's
        # gateway exits when its stdin closes), a moment after the workspace's lock is released.
        engine.session.stop()


def main(argv: list[str] | None = None) -> None:
    serve(argv, EMBEDDED, _embedded_spark, "python -m lakeline.project.sql_server")


if __name__ == "__main__":
    # Run from the module by its own name, so the replies it pickles name ``lakeline.project.sql_server``
    # classes that the client can find (not ``__main__``'s).
    from lakeline.project.sql_server import main as serve_workspace

    serve_workspace()
