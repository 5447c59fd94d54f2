"""What every ``lakeline`` command prints the same way: errors and exit codes, and tables.

Exit codes, one convention for every command:

- 0: done, nothing failed;
- 1 (``EXIT_FAILED``): the command ran and something failed, was refused or was left out (an invalid
  item, a failed run, query or step, a parked file, nothing found for what was asked);
- 2 (``EXIT_USAGE``): the command could not run as asked (a wrong option or argument, a file or a
  configuration that cannot be read, AWS that cannot be reached or refuses the call).

Tables are printed whole: on a terminal they fit its width; in a pipe or a log, where no width is to
be fitted, every value is kept whole instead of being cut at 80 columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

EXIT_FAILED = 1
EXIT_USAGE = 2

_errors = Console(stderr=True)


def counted(count: int, one: str, many: str) -> str:
    """``1 file was`` / ``2 files were``: a count and its noun (and verb) agreeing."""
    return f"{count} {one if count == 1 else many}"


def fail(message: str, *, code: int = EXIT_USAGE, problems: Sequence[str] = ()) -> NoReturn:
    """Print ``error: message`` (and each problem on a line of its own) on stderr, and exit with ``code``."""
    _errors.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    for problem in problems:
        _errors.print(f"  - {escape(problem)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def print_whole(console: Console, table: Table) -> None:
    if not console.is_terminal:
        natural = console.measure(table, options=console.options.update_width(1_000_000)).maximum
        console = Console(file=console.file, width=max(console.width, natural), log_path=False)
    console.print(table)
