"""The default runtime's own cost: the seconds spent in the SQL itself against everything else.

Runs ``lakeline demo`` (the deployed system: the CDK app synthesized, stood up on a local AWS endpoint with
IAM enforced, its state machines on the ASL interpreter, its functions from their bundled assets, Athena on
embedded Spark) and the first ``lakeline run`` of ``examples/shop`` (copied into a temporary folder), each
in this process with the runtime's timing collector on (``lakeline.runtimes.deployed.local_aws.timings``: timers at the
phases of the command, each execution, task, function invocation and query). The baseline of each run is
the SQL itself, the Spark statements the local Athena ran; everything else is the runtime's cost. Prints,
per run: each phase's seconds; the SQL's seconds against the rest (the ratio of the whole to the SQL);
where the rest went (the local Athena's catalog sync and S3 mirror around each statement, function
invocations first and warm, the interpreter's start); and per execution: its seconds, of which Spark SQL,
local Athena around it, function tasks and the interpreter (the rest: the interpreter's states and
waiting for the query worker).

Executions run concurrently and share one query worker, so per-execution figures overlap in time and add
up to more than the phase that holds them. On a machine shared with other work, compare proportions and
repeated runs (``--repeat``), not single figures.

Each run is a process of its own (as each command is: its own endpoint, its own Spark); the synth cache
(``LAKELINE_SYNTH_CACHE``) is the user's, so a run after the app's code changed includes a synth.

    .venv/bin/python -m benchmarks.runtime [--only demo|shop] [--repeat N]     # about 2-6 minutes

With ``--baseline REV`` each run alternates with the same run of commit ``REV`` (its files checked out into a
temporary folder and put first on ``PYTHONPATH``), and the end prints the paired differences: the machine's
speed drifts by a fifth within an hour, so only runs taken minutes apart compare.

    .venv/bin/python -m benchmarks.runtime --only shop --repeat 4 --baseline d4d9314
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lakeline.project.config import ProjectConfig
from lakeline.runtimes.deployed.local_aws import timings
from lakeline.runtimes.deployed.run import DeployedProject, DeployedRun

REPOSITORY = Path(__file__).resolve().parents[1]
SHOP = REPOSITORY / "examples" / "shop"
PHASES = (
    "synth",
    "Spark start",
    "stand-up (deploy, hosts)",
    "state put back",
    "sample lake",
    "tables, queries, items",
    "source tables",
    "uploads until at rest",
    "keep state",
    "lineage trace",
    "reading lineage and tables",
    "stop",
)
SQL = "athena: Spark SQL"
AROUND_SQL = ("athena: catalog and mirror in", "athena: write back, mirror out, results", "athena: queued")
FUNCTIONS = ("function: first invocation (process, imports)", "function: warm invocation")
INTERPRETER = "interpreter: start to first task"


@dataclass
class Measured:
    name: str
    seconds: float
    run: DeployedRun
    timings: timings.Timings
    cpu: float
    """CPU seconds of every process of the run (``cpu_seconds``)."""
    executions: list[tuple[str, float, dict[str, float]]] = field(default_factory=list)

    @property
    def sql(self) -> float:
        return self.timings.totals.get(SQL, 0.0)


def run_demo(folder: Path) -> DeployedRun:
    from lakeline.runtimes.deployed.demo import run_deployed_demo as demo

    return demo(folder / "demo", Console(quiet=True))


def run_shop(folder: Path) -> DeployedRun:
    project_folder = folder / "shop"
    shutil.copytree(SHOP, project_folder, ignore=shutil.ignore_patterns(".lakeline*"))
    started = time.monotonic()
    with DeployedProject(ProjectConfig.load(project_folder / "lakeline.yml"), Console(quiet=True)) as project:
        project.prepare()
        project.process(project.raw_keys())
        return project.finish(started)


RUNS: dict[str, Callable[[Path], DeployedRun]] = {"demo": run_demo, "shop": run_shop}


def cpu_seconds() -> float:
    """CPU seconds of this process, of the children it waited for (functions, Node) and of those still
    running (Spark's JVM): what the run cost whatever else the machine runs."""
    used = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        used += usage.ru_utime + usage.ru_stime
    children: dict[int, list[tuple[int, float]]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        parent, spent = int(fields[1]), sum(int(field) for field in fields[11:15]) / tick
        children.setdefault(parent, []).append((int(entry.name), spent))
    waiting = [os.getpid()]
    while waiting:
        for pid, spent in children.get(waiting.pop(), []):
            used += spent
            waiting.append(pid)
    return used


def measure(name: str) -> Measured:
    with tempfile.TemporaryDirectory(prefix=f"lakeline-runtime-{name}-") as folder, timings.collecting() as timed:
        started, cpu = time.perf_counter(), cpu_seconds()
        run = RUNS[name](Path(folder))
        seconds = time.perf_counter() - started
        cpu = cpu_seconds() - cpu
    if not run.clean:
        raise SystemExit(f"{name}: {len(run.failed)} executions failed, parked: {run.parked}")
    measured = Measured(name, seconds, run, timed, cpu)
    for record in (*run.stage_a, *run.stage_b):
        spent = timed.of_execution(record.arn)
        measured.executions.append((record.arn, spent.get("execution", 0.0), spent))
    return measured


def print_run(console: Console, measured: Measured) -> None:
    timed = measured.timings
    phases = Table(title=f"{measured.name}: {measured.seconds:.1f} s")
    for column in ("phase", "seconds", "share"):
        phases.add_column(column, justify="left" if column == "phase" else "right")
    for name in PHASES:
        if name in timed.totals:
            seconds = timed.totals[name]
            phases.add_row(name, f"{seconds:.1f}", f"{seconds / measured.seconds:.0%}")
    console.print(phases)
    rest = measured.seconds - measured.sql
    ratio = measured.seconds / measured.sql if measured.sql else float("inf")
    console.print(
        f"{measured.name}: the SQL itself (Spark, {timed.counts.get(SQL, 0)} statements) {measured.sql:.1f} s, "
        f"everything else {rest:.1f} s: the whole is {ratio:.1f}x the SQL"
    )
    parts = Table(title=f"{measured.name}: where the rest goes (summed over threads)")
    for column in ("what", "seconds", "count"):
        parts.add_column(column, justify="left" if column == "what" else "right")
    for name in (*AROUND_SQL, *FUNCTIONS, INTERPRETER):
        if name in timed.totals:
            parts.add_row(name, f"{timed.totals[name]:.1f}", str(timed.counts[name]))
    console.print(parts)
    executions = Table(title=f"{measured.name}: per execution (seconds)")
    for column in ("execution", "whole", "Spark SQL", "local Athena around it", "function tasks", "interpreter start"):
        executions.add_column(column, justify="left" if column == "execution" else "right")
    for arn, whole, spent in measured.executions:
        around = sum(spent.get(name, 0.0) for name in AROUND_SQL)
        executions.add_row(
            arn.rsplit(":", 2)[-2][-20:] + " " + arn.rsplit(":", 1)[-1][:40],
            f"{whole:.1f}",
            f"{spent.get(SQL, 0.0):.1f}",
            f"{around:.1f}",
            f"{spent.get('task: lambda:invoke', 0.0):.1f}",
            f"{spent.get(INTERPRETER, 0.0):.1f}",
        )
    console.print(executions)


def checkout(revision: str, folder: Path) -> Path:
    """Commit ``revision``'s files in ``folder`` (``git archive``: no worktree left registered), sharing this
    checkout's virtualenv and Node packages."""
    tree = folder / "baseline"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "archive", "--format=tar", revision], cwd=REPOSITORY, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    for shared in (".venv", "node_modules"):
        if (REPOSITORY / shared).exists():
            (tree / shared).symlink_to(REPOSITORY / shared)
    return tree


def run_child(name: str, tree: Path, written: Path) -> dict[str, float]:
    """One run in its own process, as each command is (its own moto backends and Spark session), of the
    code in ``tree``."""
    command = [sys.executable, "-m", "benchmarks.runtime", "--child", name, "--summary", str(written)]
    environment = {**os.environ, "PYTHONPATH": str(tree)} if tree != REPOSITORY else None
    subprocess.run(command, check=True, cwd=tree, env=environment)
    figures: dict[str, float] = json.loads(written.read_text())
    return figures


def print_pairs(
    console: Console, pairs: dict[str, list[tuple[dict[str, float], dict[str, float]]]], revision: str
) -> None:
    table = Table(title=f"this checkout against {revision}, run by run (seconds; CPU seconds)")
    for column in ("run", "this", revision, "difference", "CPU this", f"CPU {revision}"):
        table.add_column(column, justify="left" if column == "run" else "right")
    for name, runs in pairs.items():
        for this, base in runs:
            difference = this["seconds"] - base["seconds"]
            table.add_row(
                name,
                f"{this['seconds']:.1f}",
                f"{base['seconds']:.1f}",
                f"{difference:+.1f}",
                f"{this['cpu']:.0f}",
                f"{base['cpu']:.0f}",
            )
        differences = [this["seconds"] - base["seconds"] for this, base in runs]
        faster = sum(difference < 0 for difference in differences)
        console.print(
            f"{name}: median difference {statistics.median(differences):+.1f} s "
            f"({faster} of {len(runs)} runs faster than {revision})"
        )
    console.print(table)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", choices=sorted(RUNS), help="one of the runs (default: both)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (the medians are printed at the end)")
    parser.add_argument("--baseline", metavar="REV", help="alternate each run with commit REV's, paired")
    parser.add_argument("--child", choices=sorted(RUNS), help=argparse.SUPPRESS)
    parser.add_argument("--summary", type=Path, help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    console = Console()
    if arguments.child:  # one run in this process: its figures printed, its totals written for the parent
        measured = measure(arguments.child)
        print_run(console, measured)
        console.print(f"{measured.name}: CPU seconds of its processes (Python, JVM, Node) {measured.cpu:.1f}")
        if arguments.summary:
            figures = {
                "seconds": measured.seconds,
                "sql": measured.sql,
                "cpu": measured.cpu,
                "executions": len(measured.executions),
            }
            arguments.summary.write_text(json.dumps(figures))
        return
    names = [arguments.only] if arguments.only else ["demo", "shop"]
    summary: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    pairs: dict[str, list[tuple[dict[str, float], dict[str, float]]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="lakeline-runtime-") as folder:
        baseline = checkout(arguments.baseline, Path(folder)) if arguments.baseline else None
        for attempt in range(arguments.repeat):
            for name in names:
                base_first = attempt % 2 == 1  # neither side always runs first
                if baseline is not None and base_first:
                    base = run_child(name, baseline, Path(folder) / f"{name}-{attempt}-baseline.json")
                this = run_child(name, REPOSITORY, Path(folder) / f"{name}-{attempt}.json")
                summary[name].append(this)
                if baseline is not None:
                    if not base_first:
                        base = run_child(name, baseline, Path(folder) / f"{name}-{attempt}-baseline.json")
                    pairs[name].append((this, base))
    if arguments.baseline:
        print_pairs(console, pairs, arguments.baseline)
    overview = Table(title="the whole against the SQL itself (medians)")
    for column in ("run", "whole s", "SQL s", "rest s", "whole / SQL", "CPU s", "executions"):
        overview.add_column(column, justify="left" if column == "run" else "right")
    for name, runs in summary.items():
        whole = statistics.median(run["seconds"] for run in runs)
        sql = statistics.median(run["sql"] for run in runs)
        cpu = statistics.median(run["cpu"] for run in runs)
        executions = str(int(runs[0]["executions"]))
        ratio = f"{whole / sql:.1f}"
        overview.add_row(name, f"{whole:.1f}", f"{sql:.1f}", f"{whole - sql:.1f}", ratio, f"{cpu:.0f}", executions)
    console.print(overview)


if __name__ == "__main__":
    main()
