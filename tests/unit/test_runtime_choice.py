"""Which runtime a command acts on: ``run`` and ``watch`` on the local deployment unless ``--embedded``; the
commands that read what a run left follow the runtime the workspace's last run used, unless told."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lakeline.cli.lineage_records import _archive_folder
from lakeline.cli.main import app
from lakeline.cli.shared import reads_deployment
from lakeline.runtimes.deployed.local_aws import system
from lakeline.runtimes.deployed.local_aws.kept_state import MANIFEST


def _kept(root: Path, at: float, folder: str = "state") -> None:
    manifest = root / "deployed" / folder / MANIFEST
    manifest.parent.mkdir(parents=True)
    manifest.write_text("{}")
    os.utime(manifest, (at, at))


def _embedded(root: Path, at: float) -> None:
    summary = root / "summary.json"
    summary.write_text("{}")
    os.utime(summary, (at, at))


def test_a_workspace_nothing_ran_in_is_the_embedded_runtimes(tmp_path: Path) -> None:
    assert reads_deployment(None, tmp_path) is False


@pytest.mark.parametrize(("deployed_at", "embedded_at", "expected"), [(200, 100, True), (100, 200, False)])
def test_the_runtime_that_ran_last_is_read(
    tmp_path: Path, deployed_at: float, embedded_at: float, expected: bool
) -> None:
    _kept(tmp_path, deployed_at)
    _embedded(tmp_path, embedded_at)
    assert reads_deployment(None, tmp_path) is expected
    # --deployed or --embedded, when given, wins.
    assert reads_deployment(True, tmp_path) is True and reads_deployment(False, tmp_path) is False


def test_a_state_caught_between_its_two_renames_still_counts(tmp_path: Path) -> None:
    _kept(tmp_path, 100, folder="state.old")
    assert reads_deployment(None, tmp_path) is True
    assert _archive_folder(tmp_path, None) == tmp_path / "deployed" / "lineage-archive"
    assert _archive_folder(tmp_path, False) == tmp_path / "lineage-archive"


def test_run_without_the_cdk_app_says_to_use_embedded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lakeline installed from PyPI has no CDK app beside it: ``run`` says so in one line, naming --embedded,
    before anything is read or stood up."""
    monkeypatch.setattr(system, "REPOSITORY", tmp_path / "site-packages")
    (tmp_path / "lakeline.yml").write_text("raw: incoming\n")
    result = CliRunner().invoke(app, ["run", "--config", str(tmp_path / "lakeline.yml")])
    assert result.exit_code == 2, result.output
    assert "has no stacks/app.py and cdk.json" in result.output and "--embedded" in result.output
    assert not (tmp_path / ".lakeline").exists()


@pytest.mark.parametrize(
    ("statement", "looks_only"),
    [
        ("SELECT * FROM shop_pos_dev.sales", True),
        ("WITH t AS (SELECT 1 AS a) SELECT a FROM t", True),
        ("SHOW TABLES IN shop_pos_dev", True),
        ("DESCRIBE shop_pos_dev.sales", True),
        ("EXPLAIN SELECT 1", True),
        ("INSERT INTO shop_pos_raw_dev.sales SELECT * FROM shop_pos_raw_dev.sales", False),
        ("CREATE TABLE t WITH (format = 'PARQUET') AS SELECT 1 AS a", False),
        ("ALTER TABLE shop_pos_dev.sales ADD PARTITION (day = '2024-03-09')", False),
        ("DROP TABLE IF EXISTS shop_pos_dev.sales", False),
        ("MSCK REPAIR TABLE shop_pos_dev.sales", False),
        ("SELECT FROM WHERE", False),  # Athena says what is wrong; kept, in case
    ],
)
def test_the_deployed_sql_server_keeps_the_state_after_what_may_change_it(statement: str, looks_only: bool) -> None:
    from lakeline.runtimes.deployed.sql_server import changes_nothing

    assert changes_nothing(statement) is looks_only


def test_a_parse_error_is_said_without_terminal_codes(tmp_path: Path) -> None:
    """sqlglot underlines the token it could not parse with terminal codes: not in what a command prints."""
    result = CliRunner().invoke(app, ["sql", "--workspace", str(tmp_path), "--embedded", "-q", "SELECT * FROM t WHERE"])
    assert result.exit_code == 2 and "cannot parse the SQL" in result.output
    assert "\x1b[" not in result.output


def test_the_runtime_run_used_last_wins_also_when_it_found_nothing_new(tmp_path: Path) -> None:
    """run (deployed), run --embedded, run (deployed, nothing new: writes nothing else): the deployment."""
    from lakeline.cli.shared import note_runtime

    _kept(tmp_path, 100)
    _embedded(tmp_path, 200)
    assert reads_deployment(None, tmp_path) is False
    note_runtime(tmp_path, deployed=True, config=tmp_path / "lakeline.yml")
    assert reads_deployment(None, tmp_path) is True
    note_runtime(tmp_path, deployed=False, config=tmp_path / "lakeline.yml")
    assert reads_deployment(None, tmp_path) is False and reads_deployment(True, tmp_path) is True


def test_commands_given_only_the_workspace_find_the_project_its_run_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run`` records its lakeline.yml in the workspace; a command given ``--workspace`` alone reads it, also
    after the project folder moved whole; when it cannot, it says to pass ``--config``."""
    from lakeline.cli.shared import note_runtime, project_file
    from lakeline.errors import ConfigError

    project = tmp_path / "shop"
    project.mkdir()
    (project / "lakeline.yml").write_text("workspace: .lakeline\nraw: incoming\n")
    workspace = project / ".lakeline"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pytest.raises(ConfigError, match=r"does not record its project .*with --config"):
        project_file(None, workspace)
    with pytest.raises(ConfigError, match=r"no lakeline.yml in .*elsewhere.*pass --config"):
        project_file(None, None)

    note_runtime(workspace, deployed=True, config=project / "lakeline.yml")
    assert project_file(None, workspace) == project / "lakeline.yml"
    assert project_file(Path("other.yml"), workspace) == Path("other.yml")  # --config wins

    moved = tmp_path / "moved"
    project.rename(moved)
    assert project_file(None, moved / ".lakeline") == moved / "lakeline.yml"
    (moved / "lakeline.yml").write_text("workspace: /somewhere/else\n")  # no longer this workspace's project
    with pytest.raises(ConfigError, match=r"made for the project .*shop/lakeline.yml, which is not there"):
        project_file(None, moved / ".lakeline")
