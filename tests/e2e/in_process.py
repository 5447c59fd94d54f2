"""``lakeline`` commands run in the test's own process (typer's CliRunner), for the checks that need no process
of their own: a refusal made before anything starts, a report read from what a run kept. Each saves a
process start (imports; seconds on a busy machine). Every flow is also run as a process somewhere, as a
user sees it (exit code and output)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

from lakeline.cli.main import app


@dataclass
class Ran:
    """What a command gave: its exit code and its standard output and error."""

    returncode: int
    stdout: str
    stderr: str


def invoke(args: list[str], cwd: Path) -> Ran:
    """``lakeline <args>`` in the folder ``cwd``, in this process; an exception other than the command's exit is
    on stderr, as the traceback a user would see."""
    with contextlib.chdir(cwd):
        result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    error = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        error += f"Traceback: {result.exception!r}"
    return Ran(result.exit_code, result.stdout, error)
