"""``lakeline sql``'s statements: every ``--query`` given, in order (#36: typer kept only the last one)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from lakeline.cli.main import app


def test_every_query_option_is_read_not_only_the_last(tmp_path: Path) -> None:
    """The first of two ``-q`` does not parse: the command says so before it runs anything (before, the
    first was dropped without a word and only the second went on)."""
    result = CliRunner().invoke(
        app, ["sql", "--workspace", str(tmp_path), "--embedded", "-q", "SELECT * FROM t WHERE", "-q", "SELECT 1"]
    )
    assert result.exit_code == 2, result.output
    assert "cannot parse the SQL" in result.output


def test_a_file_and_a_query_together_are_refused(tmp_path: Path) -> None:
    statements = tmp_path / "q.sql"
    statements.write_text("SELECT 1")
    result = CliRunner().invoke(app, ["sql", str(statements), "--workspace", str(tmp_path), "-q", "SELECT 2"])
    assert result.exit_code == 2 and "not both" in result.output
