"""``lakeline --help`` and each group's ``--help`` list every command in one line (#38): the detail is in the
command's own ``--help``."""

from __future__ import annotations

from typing import Any

import typer.main
from typer.testing import CliRunner

from lakeline.cli.main import app

WIDTH = 100


def groups(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The command path of every group (typer's own click: a group is what has ``commands``)."""
    commands: dict[str, Any] | None = getattr(command, "commands", None)
    if commands is None:
        return []
    return [path] + [found for name, sub in commands.items() for found in groups(sub, (*path, name))]


def test_every_command_is_one_line_in_its_groups_help() -> None:
    root = typer.main.get_command(app)
    paths = groups(root)
    assert len(paths) > 5  # the top level and its groups
    runner = CliRunner()
    for path in paths:
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": str(WIDTH)}, terminal_width=WIDTH)
        assert result.exit_code == 0, result.output
        panel = result.output.split("Commands", 1)[1].split("╰", 1)[0].splitlines()[1:]
        listed = [line for line in panel if line.strip("│ ")]
        assert listed, path
        continued = [line for line in listed if line.startswith("│" + " " * 6)]
        assert continued == [], f"lakeline {' '.join(path)} --help: a command takes more than one line: {continued}"
