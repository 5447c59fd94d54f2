"""A ``kill -9`` at a random moment of a first run never leaves a workspace the next run cannot use (#37).

Each trial makes a fresh project of the shop's shape (several days of sales, some days in two files, a
daily total per store, a late file into a day already there), starts ``lakeline run --embedded`` in its
own process group, kills the whole group at a random moment of the run, then runs ``lakeline run
--embedded`` again, as a user would, and checks every figure of the daily totals against a computation
from the raw files. A trial passes when that second run exits 0 and every figure is right, or when it
refuses with one ``error:`` line and doing what the line says then loads exactly. The moments are spread
over the length of an unkilled first run, measured first (trial 0).

    .venv/bin/python -m benchmarks.kills [--trials 20] [--seed 37] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from harness.shop_project import ITEM, TABLES

LAKELINE = [sys.executable, "-m", "lakeline"]
STORES = ("north", "south", "east", "west")


def make_project(root: Path, rng: random.Random) -> Path:
    (root / "deps").mkdir(parents=True)
    (root / "deps" / "sales_by_store.json").write_text(json.dumps(ITEM))
    (root / "tables.sql").write_text(TABLES)
    (root / "lakeline.yml").write_text(
        "workspace: ws\nraw: incoming\nenvironment: dev\ndependencies: [deps]\ntables: [tables.sql]\n"
    )
    for day in range(1, 5):
        folder = root / "incoming" / "shop" / "pos" / "sales" / f"day=2024-03-0{day}"
        folder.mkdir(parents=True)
        for part in range(1 + day % 2):
            rows = [(rng.choice(STORES), rng.randint(1, 400) / 4) for _ in range(rng.randint(3, 12))]
            body = "store,amount\n" + "".join(f"{store},{amount}\n" for store, amount in rows)
            (folder / f"sales-{part}.csv").write_text(body)
    return root / "lakeline.yml"


def expected_totals(root: Path) -> dict[tuple[str, str], float]:
    """The daily totals per store, computed from the raw files."""
    totals: dict[tuple[str, str], float] = defaultdict(float)
    for path in (root / "incoming" / "shop" / "pos" / "sales").rglob("*.csv"):
        day = path.parent.name.removeprefix("day=")
        for line in path.read_text().splitlines()[1:]:
            store, amount = line.split(",")
            totals[(store, day)] += float(amount)
    return dict(totals)


def loaded_totals(root: Path) -> dict[tuple[str, str], float]:
    contents = json.loads((root / "ws" / "summary.json").read_text())["contents"]
    return {(store, day): float(amount) for store, amount, day in contents["shop_reports_dev.sales_by_store"]}


def run(config: Path, *, kill_after: float | None = None) -> tuple[int | None, str, float]:
    """``lakeline run --embedded``; killed (the whole process group, -9) ``kill_after`` seconds in.
    Returns (exit code or None if killed, output, seconds)."""
    started = time.monotonic()
    process = subprocess.Popen(
        [*LAKELINE, "run", "--embedded", "--config", str(config)],
        cwd=config.parent,
        env={**os.environ, "COLUMNS": "200"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=kill_after if kill_after is not None else 900)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        return None, output, time.monotonic() - started
    return process.returncode, output, time.monotonic() - started


def exact(root: Path) -> str:
    """Empty if every daily total is right, else what is wrong."""
    try:
        loaded = loaded_totals(root)
    except (OSError, KeyError, ValueError) as error:
        return f"no summary: {error}"
    wanted = expected_totals(root)
    wrong = [key for key in wanted.keys() | loaded.keys() if abs(wanted.get(key, 0) - loaded.get(key, 0)) > 1e-6]
    return f"{len(wrong)} wrong figures, e.g. {sorted(wrong)[0]}" if wrong else ""


@dataclass
class Trial:
    kill_at: float
    last_line: str
    rerun_exit: int | None
    rerun_seconds: float
    outcome: str


def trial(root: Path, rng: random.Random, kill_at: float) -> Trial:
    config = make_project(root, rng)
    code, output, _ = run(config, kill_after=kill_at)
    lines = [line for line in output.splitlines() if line.strip()]
    last = lines[-1].strip()[:90] if lines else "(nothing printed yet)"
    if code is not None:
        last = f"(finished before the kill, exit {code}) {last}"
    # A late file into a day the killed run may have loaded, then the user's next run.
    late = root / "incoming" / "shop" / "pos" / "sales" / "day=2024-03-01" / "late.csv"
    late.write_text("store,amount\nnorth,4.25\n")
    rerun, output, seconds = run(config)
    if rerun == 2:
        errors = [line for line in output.splitlines() if line.startswith("error:")]
        outcome = f"refused: {errors[0][:160] if errors else output[-160:]}"
    elif rerun != 0:
        outcome = f"FAILED exit {rerun}: {output.strip().splitlines()[-1][:160] if output.strip() else ''}"
    else:
        wrong = exact(root)
        outcome = f"WRONG: {wrong}" if wrong else "exact"
    return Trial(kill_at, last, rerun, seconds, outcome)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--keep", type=Path, help="keep each trial's folder under this folder")
    options = parser.parse_args()
    rng = random.Random(options.seed)
    base = options.keep or Path(tempfile.mkdtemp(prefix="lakeline-kills-"))
    base.mkdir(parents=True, exist_ok=True)
    baseline_root = base / "baseline"
    shutil.rmtree(baseline_root, ignore_errors=True)
    config = make_project(baseline_root, random.Random(options.seed))
    code, output, full = run(config)
    wrong = exact(baseline_root) if code == 0 else output[-500:]
    print(f"baseline: an unkilled first run takes {full:.0f} s, exit {code}, {wrong or 'exact'}")
    results: list[Trial] = []
    for number in range(1, options.trials + 1):
        root = base / f"trial-{number:02d}"
        shutil.rmtree(root, ignore_errors=True)
        result = trial(root, rng, rng.uniform(0.5, full))
        results.append(result)
        print(
            f"{number:2d}. killed at {result.kill_at:5.1f} s after: {result.last_line!r}\n"
            f"    next run: exit {result.rerun_exit} in {result.rerun_seconds:.0f} s: {result.outcome}",
            flush=True,
        )
        if not options.keep:
            shutil.rmtree(root, ignore_errors=True)
    good = sum(result.outcome == "exact" for result in results)
    finished = sum(result.last_line.startswith("(finished before the kill") for result in results)
    print(f"{good} of {len(results)} next runs loaded exactly ({finished} first runs finished before their kill)")
    if not options.keep:
        shutil.rmtree(base, ignore_errors=True)
    return 0 if good == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
