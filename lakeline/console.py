"""Tables printed whole: on a terminal they fit its width; in a pipe or a log, where no width is to be
fitted, every value is kept whole instead of being cut at 80 columns."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def print_whole(console: Console, table: Table) -> None:
    if not console.is_terminal:
        natural = console.measure(table, options=console.options.update_width(1_000_000)).maximum
        console = Console(file=console.file, width=max(console.width, natural), log_path=False)
    console.print(table)
