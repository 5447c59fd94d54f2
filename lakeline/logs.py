"""Where the ``lakeline`` command's log lines go: libraries' warnings (sqlglot's "contains unsupported syntax.
Falling back to parsing as a 'Command'", ``warnings.warn``) and Lakeline's own log records are kept in the
workspace's log file, ``<workspace>/state/lakeline.log``, never printed on the terminal, where only what
the command says goes.

The command line turns this on at its start (``capture``): records are held until the command names its
workspace (``to_workspace``, called where a workspace is opened) or another folder of its own
(``to_folder``, e.g. ``glue lineage``'s output), then written there. A command that never names one
writes them at its end to ``lakeline.log`` in the user's state folder (``$XDG_STATE_HOME/lakeline``), so
nothing is dropped. Library code (tests, the deployed functions) that never calls ``capture`` is left as
Python leaves it.
"""

from __future__ import annotations

import atexit
import io
import logging
import os
import sys
from pathlib import Path

LOG_NAME = "lakeline.log"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# What Python prints when nothing is configured (its last-resort handler): a library's logger set to INFO
# for its own handlers adds no INFO lines here.
LEVEL = logging.WARNING


class _Held(logging.Handler):
    """The records of a command that has not named its log file yet."""

    def __init__(self) -> None:
        super().__init__(LEVEL)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class _LazyFile(logging.FileHandler):
    """A log file made (with its folder) at its first line: a command that logs nothing leaves nothing."""

    def _open(self) -> io.TextIOWrapper:
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()


_held: _Held | None = None
_file: logging.Handler | None = None


def capture() -> None:
    """Hold every log record that reaches the root logger (Python's default level: warnings and errors) and
    every ``warnings.warn`` of this process until ``to_workspace`` or ``to_folder`` says where they go."""
    global _held
    if _held is not None:
        return
    _held = _Held()
    logging.captureWarnings(True)
    logging.getLogger().addHandler(_held)
    atexit.register(_at_exit)


def user_log() -> Path:
    """Where a command that names no folder keeps its log lines."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "lakeline" / LOG_NAME


def to_workspace(root: Path) -> None:
    """The log lines of this command go to the workspace ``root``'s log file (``state/lakeline.log``)."""
    to_folder(root / "state")


def to_folder(folder: Path) -> None:
    """The log lines of this command go to ``folder/lakeline.log``, the ones held so far first; the first
    folder named wins (a command that opens a second workspace keeps one log). Nothing if ``capture`` is off."""
    global _file
    if _held is None or _file is not None:
        return
    there = folder
    while not there.exists() and there != there.parent:
        there = there.parent
    if not os.access(there, os.W_OK):
        return  # a folder that cannot be written: held, and written at exit where it can be
    handler = _LazyFile(folder / LOG_NAME, encoding="utf-8", delay=True)
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.setLevel(LEVEL)
    for record in _held.records:
        handler.handle(record)
    _held.records.clear()
    root = logging.getLogger()
    root.addHandler(handler)
    root.removeHandler(_held)
    _file = handler


def _at_exit() -> None:
    """Records no folder was named for: into the user's log; if even that cannot be written, on stderr
    rather than lost."""
    if _held is None or not _held.records:
        return
    to_folder(user_log().parent)
    if _held.records:
        formatter = logging.Formatter(FORMAT)
        for record in _held.records:
            sys.stderr.write(formatter.format(record) + "\n")
