"""``lakeline dlq list|show`` on a workspace: the quarantine is the local dead-letter queue."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from lakeline.cli import app
from lakeline.project.quarantine import Quarantine

KEY = "shop/pos/sales/day=2024-03-01/bad.csv"
REASON = "s3://raw/shop/pos/sales/day=2024-03-01/bad.csv: line 3, column amount: 'ten' is not double"


def test_list_names_each_quarantined_file_and_show_gives_its_reason(tmp_path: Path) -> None:
    workspace = tmp_path / ".lakeline"
    (workspace / "state").mkdir(parents=True)
    Quarantine.of(workspace).park(KEY, REASON)

    listed = CliRunner().invoke(app, ["dlq", "list", "--workspace", str(workspace)])
    assert listed.exit_code == 1 and "1 quarantined" in listed.output and "'ten' is not double" in listed.output

    shown = CliRunner().invoke(app, ["dlq", "show", KEY, "--workspace", str(workspace)])
    assert shown.exit_code == 0, shown.output
    assert f"quarantined {KEY} at " in shown.output and f"reason: {REASON}" in shown.output

    missing = CliRunner().invoke(app, ["dlq", "show", "shop/pos/sales/x.csv", "--workspace", str(workspace)])
    assert missing.exit_code == 2 and "no quarantined file 'shop/pos/sales/x.csv'" in missing.output
