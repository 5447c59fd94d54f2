"""A workspace whose pipeline state was deleted or damaged is refused before anything runs (#37): the state
vouches for what each published partition holds and what was applied, so a run without it would write
new versions holding only its own arrivals over the published ones, and its failure path would delete
them. One ``error:`` line says what to do; doing it loads every table exactly, even when that run's
first start is killed while the embedded metastore is being created."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.e2e.in_process import Ran, invoke
from tests.e2e.test_run_and_watch import drop, project, totals

LAKELINE = [sys.executable, "-m", "lakeline"]


def lakeline(config: Path, *args: str) -> Ran:
    """The ``lakeline`` command, a process of its own as a user runs it."""
    result = subprocess.run(
        [*LAKELINE, *args, "--config", str(config)],
        cwd=config.parent,
        env={**os.environ, "COLUMNS": "400"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    return Ran(result.returncode, result.stdout, result.stderr)


def refusal(config: Path, *args: str) -> Ran:
    """The command run in this process: the refusals come before Spark or anything else starts (one is also
    run as a process, as a user sees it)."""
    return invoke([*args, "--config", str(config)], config.parent)


def published(root: Path) -> dict[str, str]:
    """Every file of the stage and analytics zones, with its content's digest."""
    zones = [root / "ws" / "stage", root / "ws" / "analytics"]
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for zone in zones
        for path in sorted(zone.rglob("*"))
        if path.is_file()
    }


def refused(result: Ran, *words: str) -> str:
    """The one ``error:`` line of a command refused with exit 2."""
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    (line,) = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("error:")]
    for word in words:
        assert word in line, line
    assert "Traceback" not in result.stderr
    return line


def test_a_deleted_or_damaged_pipeline_state_is_refused_and_nothing_published_changes(tmp_path: Path) -> None:
    config = project(tmp_path)
    drop(tmp_path, "2024-03-01", [("north", 10.0), ("south", 5.5)])
    drop(tmp_path, "2024-03-02", [("south", 1.0)])
    first = lakeline(config, "run", "--embedded")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    before = published(tmp_path)
    state = tmp_path / "ws" / "state" / "pipeline-state.json"
    whole = state.read_bytes()

    # Truncated: "nothing new" is not said over it, nor does a late file run on it; status says so too.
    state.write_bytes(whole[: len(whole) // 2])
    refused(refusal(config, "run", "--embedded"), str(state), "cannot be read")
    refused(refusal(config, "status", "--embedded"), str(state), "cannot be read")
    late = tmp_path / "incoming" / "shop" / "pos" / "sales" / "day=2024-03-01" / "late.csv"
    late.write_text("store,amount\nnorth,4.0\n")
    refused(refusal(config, "run", "--embedded"), str(state), "cannot be read")
    # Not JSON at all, or JSON of another shape.
    for damage in (b"\x00\x01garbage", b'{"items": []}'):
        state.write_bytes(damage)
        refused(refusal(config, "run", "--embedded"), str(state))

    # Deleted (what a user does to "reset" it), then a late file: refused, naming what to do.
    state.unlink()
    line = refused(lakeline(config, "run", "--embedded"), str(state), "is missing", "move")
    assert published(tmp_path) == before

    # Doing what the line says: every table loaded again from the raw files, the late row included.
    shutil.move(tmp_path / "ws", tmp_path / "ws.aside")
    # ... and that run's first start killed while Derby created the metastore (what it leaves: the folder
    # without its service.properties, which Derby refuses to boot or create again).
    half_made = tmp_path / "ws" / "metastore" / "metastore_db"
    for folder in ("log", "seg0"):
        (half_made / folder).mkdir(parents=True)
    (half_made / "log" / "log.ctrl").write_bytes(b"\0" * 48)
    again = lakeline(config, "run", "--embedded")
    assert again.returncode == 0, line + again.stdout[-2000:] + again.stderr[-2000:]
    expected = [["north", 14.0, "2024-03-01"], ["south", 5.5, "2024-03-01"], ["south", 1.0, "2024-03-02"]]
    assert sorted(totals(tmp_path)["shop_reports_dev.sales_by_store"], key=str) == sorted(expected, key=str)
    assert (tmp_path / "ws" / "metastore" / "metastore_db.half-made").is_dir()

    # A first run killed (kill -9) after its runs published, before it saved its state: what it leaves is
    # the state it started from (empty), its marker, and a metastore and run folders ahead of that state;
    # the same arrivals plan the same run folders again. Its publications are undone and the batch runs
    # again whole: before, every run failed on "non-empty directory" and its failure path deleted the data.
    state.write_text("[]")
    (tmp_path / "ws" / "state" / "running.json").write_text("{}")
    after_kill = lakeline(config, "run", "--embedded")
    assert after_kill.returncode == 0, after_kill.stdout[-3000:] + after_kill.stderr[-2000:]
    assert "the last run was stopped before it saved its state" in after_kill.stdout
    assert sorted(totals(tmp_path)["shop_reports_dev.sales_by_store"], key=str) == sorted(expected, key=str)
    assert not (tmp_path / "ws" / "state" / "running.json").exists()
