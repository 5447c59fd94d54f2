"""The pipeline at a lake's volume, on the local deployment (#39).

Runs ``lakeline run``'s default runtime (the CDK app stood up on a local AWS endpoint with IAM enforced, its
state machines on the ASL interpreter, its functions from their assets, Athena on embedded Spark) over a
generated project:

- ``burst``: a burst of ``--burst`` small CSV files (default 2,000) into one partition;
- ``spread``: ``--partitions`` partitions (default 100) of ``--per-partition`` files each (default 5);
- ``big``: one CSV of ``--big-mb`` megabytes (default 1,024; 0 leaves it out);
- a stage B target chained to each of ``burst`` and ``spread`` (rows and takings per day).

Every row carries an id unique in the project, so what the tables hold is counted against the files sent.
Prints: files per minute; p50/p95 seconds from a file's upload to the commit of its partition and to its
day's target; executions per partition; the largest state machine input or state, SQS message, DynamoDB item
and SQL statement seen (each against a quarter of its AWS quota); rows lost or doubled (both must be 0).
The sizes are read where the local endpoint serves the requests (moto's backends in this process), so
requests from the functions' processes are seen too.

    .venv/bin/python -m benchmarks.scale                       # about 20-40 minutes on 2 cores
    .venv/bin/python -m benchmarks.scale --burst 300 --partitions 10 --big-mb 0      # a few minutes
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from lakeline.commits.batch import BatchRef, read_batch
from lakeline.project.config import ProjectConfig
from lakeline.runtimes.deployed.local_aws.executions import ExecutionRecord
from lakeline.runtimes.deployed.run import DeployedProject
from lakeline.storage import ObjectStore, S3ObjectStore
from stage_a.arrivals import pending_arrival

TEAM, DATASET, REPORTS = "scale", "feed", "reports"
RAW_DB, STAGE_DB, TARGET_DB = f"{TEAM}_{DATASET}_raw_dev", f"{TEAM}_{DATASET}_dev", f"{TEAM}_{REPORTS}_dev"
ROWS_PER_FILE = 5
BURST_DAY = date(2026, 11, 1)
BIG_DAY = date(2026, 11, 2)
SPREAD_FIRST_DAY = date(2026, 6, 1)
QUOTAS = {  # a quarter of each AWS quota is the bound (#39)
    "state machine input or state": 256 * 1024,
    "SQS message": 256 * 1024,
    "DynamoDB item": 400 * 1024,
    "SQL statement": 262_144,
}


# --- the project -----------------------------------------------------------------------------------------


def _csv(prefix: str, rows: int) -> str:
    return "id,store,amount\n" + "".join(f"{prefix}-{row},s{row % 7},{row % 100}.25\n" for row in range(rows))


def write_project(
    folder: Path, *, burst: int, partitions: int, per_partition: int, big_mb: int, max_files: int | None = None
) -> dict[str, int]:
    """The project's files; returns the rows each raw table's files hold. ``max_files``: the stage tables'
    (a small one makes runs compact the partition often)."""
    incoming = folder / "incoming" / TEAM / DATASET
    rows: dict[str, int] = defaultdict(int)
    for index in range(burst):
        path = incoming / "burst" / f"day={BURST_DAY}" / f"part-{index:05d}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_csv(f"b{index}", ROWS_PER_FILE))
        rows["burst"] += ROWS_PER_FILE
    for day in range(partitions):
        for index in range(per_partition):
            path = incoming / "spread" / f"day={SPREAD_FIRST_DAY + timedelta(days=day)}" / f"part-{index:03d}.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(_csv(f"s{day}-{index}", ROWS_PER_FILE))
            rows["spread"] += ROWS_PER_FILE
    if big_mb:
        rows["big"] = _write_big(incoming / "big" / f"day={BIG_DAY}" / "big.csv", big_mb * 1024 * 1024)
    (folder / "tables.sql").write_text(
        f"CREATE DATABASE IF NOT EXISTS {TARGET_DB};\n"
        + "".join(
            f"CREATE EXTERNAL TABLE IF NOT EXISTS {TARGET_DB}.{table}_daily (rows BIGINT, amount DOUBLE)\n"
            f"PARTITIONED BY (day STRING) STORED AS PARQUET LOCATION '$analytics_root/{table}_daily/';\n"
            for table in ("burst", "spread")
        )
    )
    (folder / "dependencies").mkdir()
    (folder / "athena_queries" / TEAM).mkdir(parents=True)
    for table in ("burst", "spread"):
        item = {
            "dataset": f"{TARGET_DB}.{table}_daily",
            "dependencies": [
                {
                    "TableName": f"{STAGE_DB}.{table}",
                    "FieldColumn": "day",
                    "Usage": "overwrite",
                    "DateExpression": "%Y-%m-%d",
                    "relativedelta_attributes": {"days": 0},
                }
            ],
            "partitionColumn": "day",
            "partitionPythonMask": "%Y-%m-%d",
            "steps": [{"db": TARGET_DB, "sql_file": f"{table}_daily.sql", "info": f"rows of {table} per day"}],
            "date_substitutions": [{"token": "$day", "format": "%Y-%m-%d", "relativedelta_attributes": {"days": 0}}],
        }
        (folder / "dependencies" / f"{table}_daily.json").write_text(json.dumps(item, indent=2))
        (folder / "athena_queries" / TEAM / f"{table}_daily.sql").write_text(
            f"INSERT INTO {TARGET_DB}.{table}_daily\n"
            f"SELECT count(*) AS rows, sum(amount) AS amount, '$day' AS day FROM {STAGE_DB}.{table} "
            "WHERE day = '$day'\n"
        )
    settings = f"default_table: {{max_files: {max_files}}}\n" if max_files else ""
    (folder / "lakeline.yml").write_text(
        "workspace: .lakeline\nraw: incoming\nenvironment: dev\ndependencies: [dependencies]\n"
        f"tables: [tables.sql]\nqueries: athena_queries\n{settings}"
    )
    return dict(rows)


def _write_big(path: Path, size: int) -> int:
    """A CSV of about ``size`` bytes; returns its rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = 0
    with path.open("w") as out:
        out.write("id,store,amount\n")
        written = 16
        while written < size:
            chunk = "".join(f"g{row},s{row % 7},{row % 100}.25\n" for row in range(rows, rows + 100_000))
            out.write(chunk)
            written += len(chunk)
            rows += 100_000
    return rows


# --- what the endpoint served ----------------------------------------------------------------------------


@dataclass
class Served:
    """The largest request of each kind the endpoint served, and when each raw object was put."""

    largest: dict[str, tuple[int, str]] = field(default_factory=dict)
    uploaded: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def saw(self, kind: str, size: int, what: str) -> None:
        with self._lock:
            if size > self.largest.get(kind, (-1, ""))[0]:
                self.largest[kind] = (size, " ".join(what.split())[:48])


@contextmanager
def watching_the_endpoint(served: Served, raw_bucket: str) -> Iterator[None]:
    """Wrap moto's backends (the endpoint's, in this process) to see every request's size; undone after."""
    from moto.athena.models import AthenaBackend
    from moto.dynamodb.models import DynamoDBBackend
    from moto.s3.models import S3Backend
    from moto.sqs.models import SQSBackend

    originals: list[tuple[type, str, Any]] = []

    def wrap(cls: type, name: str, make: Any) -> None:
        original = getattr(cls, name)
        originals.append((cls, name, original))
        setattr(cls, name, make(original))

    def item_size(original: Any) -> Any:
        def call(self: Any, table_name: str, *args: Any, **kwargs: Any) -> Any:
            item = original(self, table_name, *args, **kwargs)
            if item is not None:
                served.saw("DynamoDB item", item.size(), table_name)
            return item

        return call

    def message(original: Any) -> Any:
        def call(self: Any, queue_name: str, message_body: str, *args: Any, **kwargs: Any) -> Any:
            served.saw("SQS message", len(message_body.encode()), queue_name)
            return original(self, queue_name, message_body, *args, **kwargs)

        return call

    def batch(original: Any) -> Any:
        def call(self: Any, queue_name: str, entries: dict[str, dict[str, Any]]) -> Any:
            for entry in entries.values():
                served.saw("SQS message", len(entry["MessageBody"].encode()), queue_name)
            return original(self, queue_name, entries)

        return call

    def query(original: Any) -> Any:
        def call(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
            served.saw("SQL statement", len(query.encode()), query)
            return original(self, query, *args, **kwargs)

        return call

    def upload(original: Any) -> Any:
        def call(self: Any, bucket_name: str, key_name: str, *args: Any, **kwargs: Any) -> Any:
            if bucket_name == raw_bucket:
                served.uploaded.setdefault(key_name, time.time())
            return original(self, bucket_name, key_name, *args, **kwargs)

        return call

    wrap(DynamoDBBackend, "put_item", item_size)
    wrap(DynamoDBBackend, "update_item", item_size)
    wrap(SQSBackend, "send_message", message)
    wrap(SQSBackend, "send_message_batch", batch)
    wrap(AthenaBackend, "start_query_execution", query)
    wrap(S3Backend, "put_object", upload)
    try:
        yield
    finally:
        for cls, name, original in reversed(originals):
            setattr(cls, name, original)


def _payload_sizes(served: Served, records: list[ExecutionRecord]) -> None:
    for record in records:
        served.saw("state machine input or state", len(json.dumps(record.input).encode()), record.arn)
        for task in record.tasks:
            for data in (task.input, task.output):
                if data is not None:
                    served.saw("state machine input or state", len(json.dumps(data).encode()), task.state)


# --- the figures -----------------------------------------------------------------------------------------


def _plan(record: ExecutionRecord) -> dict[str, Any]:
    data = record.input if isinstance(record.input, dict) else {}
    plan = data.get("plan", data)
    return plan if isinstance(plan, dict) else {}


def _percentiles(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.0f} / {values[0]:.0f}"
    cuts = statistics.quantiles(values, n=20)
    return f"{statistics.median(values):.0f} / {cuts[18]:.0f}"


@dataclass
class Figures:
    files: int
    seconds: float
    to_commit: dict[str, list[float]]
    to_target: dict[str, list[float]]
    not_committed: int
    executions: dict[str, list[int]]
    failed: int
    modes: dict[str, int] = field(default_factory=dict)
    """Stage A runs by what they wrote (``append``, ``compact``, ...)."""
    batches: dict[str, list[int]] = field(default_factory=dict)
    """The arrivals each stage A run of a table took, in the order the runs started (a partition's batches show
    whether its follow-ups waited for full ones)."""


def taken_entries(stage_a: list[ExecutionRecord], store: ObjectStore) -> dict[str, list[str]]:
    """The ``pending`` entries each stage A run took, by its batch object's location: read from the batch its
    input names (``lakeline.commits.batch``) while the deployment stands."""
    taken: dict[str, list[str]] = {}
    for record in stage_a:
        plan = _plan(record)
        if isinstance(plan.get("batch"), dict):
            ref = BatchRef(**plan["batch"])
            taken[ref.location] = list(read_batch(store, ref, str(plan["target_location"])).pending)
    return taken


def figures(
    stage_a: list[ExecutionRecord],
    stage_b: list[ExecutionRecord],
    uploaded: dict[str, float],
    taken: dict[str, list[str]] | None = None,
) -> Figures:
    """``taken``: each run's batch by its location (``taken_entries``), for a run whose input names it; a plan from
    before carries its batch inline, as its lease's ``pending``."""
    committed: dict[str, float] = {}  # raw key → when the run that took it ended
    runs: dict[tuple[str, str], int] = defaultdict(int)
    modes: dict[str, int] = defaultdict(int)
    batches: dict[str, list[int]] = defaultdict(list)
    for record in sorted(stage_a, key=lambda record: record.started):
        plan = _plan(record)
        modes[str(plan.get("mode"))] += 1
        if isinstance(plan.get("batch"), dict):
            batches[str(plan.get("table"))].append(int(plan["batch"]["count"]))
        partition = json.dumps(plan.get("partition", {}), sort_keys=True)
        runs[(str(plan.get("table")), partition)] += 1
        if record.status != "SUCCEEDED" or record.ended is None:
            continue
        batch = plan.get("batch")
        inline = (plan.get("lease") or {}).get("pending", [])
        for entry in (taken or {})[batch["location"]] if isinstance(batch, dict) else inline:
            key = pending_arrival(entry).key
            committed[key] = min(committed.get(key, record.ended), record.ended)
    targets: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for record in stage_b:
        plan = _plan(record)
        if record.status == "SUCCEEDED" and record.ended is not None:
            day = str(plan.get("partition", {}).get("day"))
            targets[(str(plan.get("target_table")), day)].append((record.started, record.ended))
    to_commit: dict[str, list[float]] = defaultdict(list)
    to_target: dict[str, list[float]] = defaultdict(list)
    for key, put in uploaded.items():
        table = key.split("/")[2]
        day = key.split("/")[3].removeprefix("day=")
        if key not in committed:
            continue
        to_commit[table].append(committed[key] - put)
        # The first run of the day's target that started after the file's partition was committed reads it.
        after = [ended for started, ended in targets.get((f"{table}_daily", day), []) if started >= committed[key]]
        if after:
            to_target[table].append(min(after) - put)
    executions: dict[str, list[int]] = defaultdict(list)
    for (table, _), count in runs.items():
        executions[table].append(count)
    ends = [record.ended for record in (*stage_a, *stage_b) if record.ended is not None]
    first = min(uploaded.values(), default=0.0)
    return Figures(
        files=len(uploaded),
        seconds=(max(ends) - first) if ends else 0.0,
        to_commit=to_commit,
        to_target=to_target,
        not_committed=len(set(uploaded) - set(committed)),
        executions=executions,
        failed=sum(record.status != "SUCCEEDED" for record in (*stage_a, *stage_b)),
        modes=dict(modes),
        batches=dict(batches),
    )


# --- the run ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--burst", type=int, default=2000, help="files into one partition (default 2000)")
    parser.add_argument("--partitions", type=int, default=100, help="partitions of the spread table (default 100)")
    parser.add_argument("--per-partition", type=int, default=5, help="files into each of them (default 5)")
    parser.add_argument("--big-mb", type=int, default=1024, help="megabytes of the one large CSV (0: none)")
    parser.add_argument("--keep", type=Path, help="build the project in this folder and keep it")
    arguments = parser.parse_args(argv)
    console = Console()
    with tempfile.TemporaryDirectory(prefix="lakeline-scale-") as scratch:
        folder = arguments.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        with console.status("writing the project"):
            expected = write_project(
                folder,
                burst=arguments.burst,
                partitions=arguments.partitions,
                per_partition=arguments.per_partition,
                big_mb=arguments.big_mb,
            )
        console.print(f"project in {folder}: rows sent per table {expected}")
        return report(console, run(folder, expected, console))


@dataclass
class ScaleRun:
    """What one run of the project showed."""

    figures: Figures
    served: Served
    expected: dict[str, int]
    """Rows each raw table's files hold."""
    counted: dict[str, tuple[int, int]]
    """Each stage table's rows and distinct ids."""
    targets: dict[str, int]
    """Rows each daily target counts."""
    parked: dict[str, list[str]]
    trace_seconds: float
    """The nightly lineage trace over everything the run wrote, from the schedule's start to rest."""

    @property
    def largest_share(self) -> float:
        """The largest payload seen, as a share of its AWS quota."""
        return max(self.served.largest.get(kind, (0, ""))[0] / quota for kind, quota in QUOTAS.items())

    @property
    def rows_wrong(self) -> dict[str, tuple[int, int, int]]:
        """Each table whose rows are not those sent: (lost, doubled, target's count off by)."""
        wrong = {}
        for table, sent in self.expected.items():
            held, distinct = self.counted[table]
            off = self.targets[table] - sent if table in self.targets else 0
            if (sent - distinct, held - distinct, off) != (0, 0, 0):
                wrong[table] = (sent - distinct, held - distinct, off)
        return wrong

    @property
    def clean(self) -> bool:
        figures = self.figures
        bounded = self.largest_share <= 0.25
        return bounded and not (self.rows_wrong or figures.failed or figures.not_committed or any(self.parked.values()))


def run(folder: Path, expected: dict[str, int], console: Console) -> ScaleRun:
    """``lakeline run`` (the default runtime) of the project in ``folder``, watched."""
    served = Served()
    started = time.monotonic()
    with DeployedProject(ProjectConfig.load(folder / "lakeline.yml"), console) as project:
        raw_bucket = project.operator.buckets["raw"]  # known once the deployment stands
        with watching_the_endpoint(served, raw_bucket):
            project.prepare()
            project.process(project.raw_keys())
            stage_a, stage_b = project.executions()  # before the trace's: the data pipeline's figures
            taken = taken_entries(stage_a, S3ObjectStore(project.operator.deployment.client("s3")))
            tracing = time.monotonic()
            project.trace()  # as ``lakeline run`` ends: the schedule fans the lineage roots out on the trace queue
            trace_seconds = time.monotonic() - tracing
            parked = project.operator.parked()
            counted: dict[str, tuple[int, int]] = {}
            for table in expected:
                rows = project.operator.athena(f"SELECT count(*), count(DISTINCT id) FROM {STAGE_DB}.{table}")
                counted[table] = (int(rows[0][0]), int(rows[0][1]))
            targets: dict[str, int] = {
                table: int(
                    project.operator.athena(f"SELECT coalesce(sum(rows), 0) FROM {TARGET_DB}.{table}_daily")[0][0]
                )
                for table in ("burst", "spread")
                if table in expected
            }
    _payload_sizes(served, [*stage_a, *stage_b])
    found = figures(stage_a, stage_b, served.uploaded, taken)
    console.print(f"done in {time.monotonic() - started:.0f} s")
    return ScaleRun(found, served, expected, counted, targets, parked, trace_seconds)


def report(console: Console, scale: ScaleRun) -> int:
    found, served = scale.figures, scale.served
    per_minute = found.files / found.seconds * 60 if found.seconds else 0.0
    console.print(
        f"{found.files} files in {found.seconds:.0f} s from the first upload to the last execution's end: "
        f"{per_minute:.0f} files per minute; {found.failed} executions failed; "
        f"{found.not_committed} files taken by no successful run; stage A runs by what they wrote: {found.modes}"
    )
    latency = Table(title="seconds from upload (p50 / p95)")
    for column in ("table", "files", "to its partition's commit", "to its day's target", "executions per partition"):
        latency.add_column(column, justify="left" if column == "table" else "right")
    for table in sorted(scale.expected):
        runs = found.executions.get(table, [])
        spread = f"{min(runs)}-{max(runs)} (median {statistics.median(runs):.0f})" if runs else "-"
        latency.add_row(
            table,
            str(len(found.to_commit.get(table, []))),
            _percentiles(found.to_commit.get(table, [])),
            _percentiles(found.to_target.get(table, [])),
            spread,
        )
    console.print(latency)
    for table, counts in sorted(found.batches.items()):
        if len(counts) <= 20:
            console.print(f"stage A batches of {table}, in the order their runs started: {', '.join(map(str, counts))}")
    console.print(f"the nightly lineage trace over it all: {scale.trace_seconds:.0f} s")
    sizes = Table(title="the largest payloads seen")
    for column in ("what", "bytes", "quota", "share", "where"):
        sizes.add_column(column, justify="right" if column in {"bytes", "quota", "share"} else "left")
    for kind, quota in QUOTAS.items():
        size, where = served.largest.get(kind, (0, ""))
        sizes.add_row(kind, f"{size:,}", f"{quota:,}", f"{size / quota:.1%}", where)
    console.print(sizes)
    rows = Table(title="rows: sent against held")
    for column in ("table", "sent", "held", "distinct ids", "lost", "doubled", "in the daily target"):
        rows.add_column(column, justify="left" if column == "table" else "right")
    for table, sent in sorted(scale.expected.items()):
        held, distinct = scale.counted[table]
        target = str(scale.targets.get(table, "-"))
        rows.add_row(
            table, f"{sent:,}", f"{held:,}", f"{distinct:,}", str(sent - distinct), str(held - distinct), target
        )
    console.print(rows)
    for queue, reasons in scale.parked.items():
        if reasons:
            console.print(f"parked in {queue}: {len(reasons)}, first: {reasons[0][:300]}")
    if scale.clean:
        console.print("[green]every row once, every payload under a quarter of its quota[/]")
        return 0
    console.print("[red]not at scale yet[/]")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
