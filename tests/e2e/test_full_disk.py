"""A full disk during ``lakeline run --embedded`` (#37): the run stops at the first write that fails, with
one ``error:`` line and exit 2, and keeps the pipeline state of before the run; once space is freed, the
next run undoes what the stopped one published beyond that state and loads every table exactly.

The disk is real: a 40 MB tmpfs holding the whole project (raw files, workspace, Derby metastore), filled
while the run is under way, so every layer meets the full disk as it would (Python's writes, Spark's
task writers, Derby's pages and log)."""

from __future__ import annotations

import contextlib
import csv
import errno
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_run_and_watch import drop, lakeline_run, project, totals

LAKELINE = [sys.executable, "-m", "lakeline"]
DAYS = ("2024-03-01", "2024-03-02")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 40 MB tmpfs mounted for the test (root only: mounting needs it), unmounted after."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs (a real disk that can be filled) needs root and mount(8)")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> list[Path]:
    """Take every byte left on ``disk``, in files that are returned (deleting them frees the space)."""
    taken, size = [], 1 << 30
    while size >= 512:
        path = disk / f"filler-{len(taken)}"
        descriptor = os.open(path, os.O_CREAT | os.O_WRONLY)
        try:
            os.posix_fallocate(descriptor, 0, size)
            taken.append(path)
        except OSError as error:
            assert error.errno == errno.ENOSPC, error
            path.unlink()
            size //= 2
        finally:
            os.close(descriptor)
    return taken


def run_filling(config: Path, disk: Path, after_runs: int) -> tuple[subprocess.CompletedProcess[str], list[Path]]:
    """``lakeline run --embedded``, the disk filled as the run's stage A run number ``after_runs + 1`` starts
    (the ones before it are published by then)."""
    process = subprocess.Popen(
        [*LAKELINE, "run", "--embedded", "--config", str(config)],
        cwd=config.parent,
        env={**os.environ, "COLUMNS": "400", "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    lines, started, taken = [], 0, []
    with contextlib.ExitStack() as stack:
        stack.callback(process.kill)
        for line in process.stdout:
            lines.append(line)
            started += " stage A: " in line
            if started == after_runs + 1 and not taken:
                taken = fill(disk)
        process.wait(timeout=300)
        stack.pop_all()
    return subprocess.CompletedProcess(process.args, process.returncode, "".join(lines), process.stderr.read()), taken


def expected_totals(raw: Path) -> list[list[object]]:
    """``sales_by_store`` computed from the raw files: each store's sum per day."""
    sums: dict[tuple[str, str], float] = {}
    for path in raw.rglob("*.csv"):
        day = path.parent.name.removeprefix("day=")
        with path.open() as rows:
            for row in csv.DictReader(rows):
                sums[(row["store"], day)] = sums.get((row["store"], day), 0.0) + float(row["amount"])
    return sorted(([store, round(total, 2), day] for (store, day), total in sums.items()), key=str)


def test_a_full_disk_stops_the_run_and_the_next_run_loads_exactly(small_disk: Path) -> None:
    config = project(small_disk)
    for number, day in enumerate(DAYS):
        drop(small_disk, day, [(f"store{store}", number * 10 + store + 0.25) for store in range(3)])
    extra = small_disk / "incoming" / "shop" / "pos" / "sales" / f"day={DAYS[0]}" / "more.csv"
    extra.write_text("store,amount\nstore0,1.5\nstore9,2.0\n")
    # An unpartitioned table, loaded first (its key sorts first): its catalog entry points at a run prefix.
    (small_disk / "incoming" / "shop" / "pos" / "items").mkdir(parents=True)
    (small_disk / "incoming" / "shop" / "pos" / "items" / "items.csv").write_text("item,price\ntea,2.5\ncake,4.0\n")
    state = small_disk / "ws" / "state" / "pipeline-state.json"

    # The disk fills once two files are published: the third run's CTAS is the first write to fail.
    stopped, taken = run_filling(config, small_disk, after_runs=2)
    output = stopped.stdout + stopped.stderr
    assert stopped.returncode == 2, output[-3000:]
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "the disk is full" in errors[0] and str(small_disk) in errors[0], output[-3000:]
    assert "Traceback" not in output and "AnalysisException" not in output
    # Stopped there: no progress line says a file failed (the full disk is the one error).
    assert not re.search(r"^\S+ failed: ", stopped.stdout, re.MULTILINE), stopped.stdout
    assert json.loads(state.read_text()) == []  # the state of before the run (the first: nothing)
    assert not list(state.parent.glob("*.tmp"))

    for path in taken:
        path.unlink()
    again = lakeline_run(config)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "the last run was stopped before it saved its state" in again.stdout
    loaded = sorted(
        (
            [store, round(amount, 2), day]
            for store, amount, day in totals(small_disk)["shop_reports_dev.sales_by_store"]
        ),
        key=str,
    )
    assert loaded == expected_totals(small_disk / "incoming" / "shop" / "pos" / "sales")
    rows = json.loads((small_disk / "ws" / "summary.json").read_text())["tables"]
    stage = {row["partition"]: row["rows"] for row in rows if row["table"] == "shop_pos_dev.sales"}
    assert stage == {f"day={DAYS[0]}": 5, f"day={DAYS[1]}": 3}
    assert {"table": "shop_pos_dev.items", "partition": "", "rows": 2, "files": 1} in rows
