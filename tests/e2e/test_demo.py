"""The demo and the stage A command run as a user runs them: separate processes, real Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

LAKELINE = [sys.executable, "-m", "lakeline"]


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([*LAKELINE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def demo_workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    workspace = tmp_path_factory.mktemp("demo")
    return workspace, run(["demo", "--workspace", str(workspace)], cwd=workspace)


def test_demo_runs_stage_a_for_every_arrival(
    demo_workspace: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    workspace, result = demo_workspace
    assert result.returncode == 0, result.stderr
    assert "9 deliveries (8 arrivals + 1 redelivery)" in result.stdout
    lines = [line for line in result.stdout.splitlines() if "engineering_" in line]
    customers = [line for line in lines if "engineering_mysql_dev.customers" in line]
    orders = [line for line in lines if "engineering_sales_dev.orders" in line]
    assert len(customers) == 4 and len(orders) == 4
    for line in customers:
        cells = [cell.strip() for cell in line.split("│") if cell.strip()]
        assert cells[2:5] == ["500", "500", "1"], line
    for line in orders:
        cells = [cell.strip() for cell in line.split("│") if cell.strip()]
        assert cells[2:5] == ["5000", "5000", "2"], line
    partitions = sorted(p.name for p in (workspace / "stage/engineering/sales/orders").iterdir())
    assert partitions == ["date=20220117", "date=20220118", "date=20220119", "date=20220120"]
    for partition in partitions:
        runs = list((workspace / "stage/engineering/sales/orders" / partition).iterdir())
        assert len(runs) == 1, f"superseded run prefixes left in {partition}: {runs}"


def test_stage_a_run_command_on_the_demo_workspace_is_idempotent(
    demo_workspace: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    workspace, _ = demo_workspace
    key = "engineering/mysql/customers/date=20220119/customers_20220119.csv"
    result = run(["stage-a", "run", "--workspace", str(workspace), "--key", key, "--environment", "dev"], cwd=workspace)
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout)
    assert output["table"] == "engineering_mysql_dev.customers"
    assert output["partition"] == {"date": "20220119"}
    assert output["rows"] == 500
    assert len(output["files"]) == 1
    assert len(output["superseded_deleted"]) == 1


def test_stage_a_run_rejects_a_bad_key_before_starting_spark(tmp_path: Path) -> None:
    result = run(["stage-a", "run", "--workspace", str(tmp_path), "--key", "a/b/c/d=x;y/f.csv"], cwd=tmp_path)
    assert result.returncode == 2
    assert "rejected" in result.stderr
    assert result.stdout == ""
