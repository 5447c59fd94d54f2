"""``lakeline run`` over folders a real lake receives: a workspace whose path holds '#' or '?'. Nothing
outside a failed run's own prefix is deleted."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_run_and_watch import ITEM, LAKELINE, drop, project


def failing_item() -> dict[str, Any]:
    """The project's stage B item with a step that fails on Spark (a column the source does not have)."""
    (step,) = ITEM["steps"]
    return {**ITEM, "steps": [{**step, "sql": step["sql"].replace(" GROUP BY", " AND no_such_column = 1 GROUP BY")}]}


def run(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LAKELINE, "run", "--config", str(config)],
        cwd=config.parent,
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=900,
    )


def summary(workspace: Path) -> Any:
    return json.loads((workspace / "summary.json").read_text())


@pytest.mark.parametrize("workspace_name", ["#lake", "?lake"])
def test_a_failed_run_in_a_workspace_named_with_a_hash_or_a_question_mark_deletes_only_its_own_prefix(
    tmp_path: Path, workspace_name: str
) -> None:
    """Parsed as a URL, the failed run's prefix ``<project>/#lake/analytics/.../lakeline_run=.../`` was
    cut at the '#' (or '?') and the failure function deleted the whole project folder."""
    root = tmp_path / "project"
    config = project(root)
    (root / "deps" / "sales_by_store.json").write_text(json.dumps(failing_item()))
    config.write_text(config.read_text().replace("workspace: ws", f"workspace: {json.dumps(workspace_name)}"))
    drop(root, "2024-03-01", [("north", 10.0), ("south", 5.5)])
    raw_file = root / "incoming" / "shop" / "pos" / "sales" / "day=2024-03-01" / "sales.csv"
    sentinel = root / "sentinel.txt"
    sentinel.write_text("not the pipeline's")

    result = run(config)

    assert sentinel.read_text() == "not the pipeline's", result.stdout[-3000:] + result.stderr[-3000:]
    assert raw_file.exists() and config.exists()
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    workspace = root / workspace_name
    (failure,) = summary(workspace)["failures"]
    assert "no_such_column" in failure and "\n" not in failure
    # Stage A's output is there; the failed stage B run left no prefix behind.
    stage = workspace / "stage" / "shop" / "pos" / "sales" / "day=2024-03-01"
    assert [p.name[: len("lakeline_run=")] for p in stage.iterdir()] == ["lakeline_run="]
    assert list((workspace / "analytics").rglob("lakeline_run=*")) == []
