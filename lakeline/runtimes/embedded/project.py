"""``lakeline run`` and ``lakeline watch``: the local pipeline over a user's own folders.

The project's configuration (``lakeline.yml``), which both runtimes read: ``lakeline.project.config``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote

import sqlglot
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from lakeline.commits import PartitionCommits
from lakeline.console import print_whole
from lakeline.dependencies.files import load_items
from lakeline.dependencies.model import DependencyItem
from lakeline.engines.spark import SparkEngine
from lakeline.errors import InvalidInputError
from lakeline.lineage.openlineage.config import load_openlineage_settings
from lakeline.lineage.records.query import load_query, query_local_archive
from lakeline.lineage.viewer.html import write_lineage_html
from lakeline.names import check_identifier, ddl_name, dml_name
from lakeline.project.catalog import ensure_tables, first_files, split_by_table, table_errors, table_refusal
from lakeline.project.config import ProjectConfig, project_snapshot, raw_keys
from lakeline.project.quarantine import Quarantine
from lakeline.project.relocation import open_engine
from lakeline.project.settled import Settled, file_digest
from lakeline.project.unresolved import carry_unresolved
from lakeline.project.workspace import Workspace, write_json
from lakeline.runtimes.embedded.cloud import LocalCloud
from lakeline.runtimes.embedded.event_flow import EventFlow, FlowReport
from lakeline.runtimes.embedded.full_disk import full_disk
from lakeline.runtimes.embedded.stage_a import partition_row_count
from lakeline.runtimes.embedded.unsaved_runs import undo_unsaved_runs
from lakeline.settings import PipelineSettings
from lakeline.storage import LocalObjectStore
from stage_b.messages import StageBMessage


@dataclass
class ProjectRun:
    workspace: Workspace
    report: FlowReport
    tables: list[dict[str, Any]] = field(default_factory=list)
    contents: dict[str, list[list[Any]]] = field(default_factory=dict)
    archive_objects: int = 0
    archived_lineage_rows: int = 0
    html: Path | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class ProgressMark:
    """Where a flow's counts stood when a ``process`` began."""

    arrived: int
    settled: int
    stage_b: int

    @classmethod
    def of(cls, report: FlowReport) -> ProgressMark:
        return cls(report.arrived, report.settled, len(report.stage_b))


class LocalProject:
    """Engine, local AWS endpoint and event flow for one workspace, started together."""

    def __init__(self, config: ProjectConfig, console: Console, *, settings: PipelineSettings | None = None) -> None:
        """``settings``: instead of the project's (a single-stage command's, with its command-line options)."""
        self.config = config
        self.console = console
        self.workspace = Workspace.at(config.workspace, config.raw)
        self.settings: PipelineSettings = settings or self.workspace.settings(
            environment=config.environment, default_table=config.default_table, tables=config.tables_settings
        )
        self.engine: SparkEngine | None = None
        self.cloud: LocalCloud | None = None
        self.flow: EventFlow | None = None
        self.items: list[DependencyItem] = []
        self._bar: Callable[[], None] | None = None  # the progress bar's update, while one shows

    def _progress(self, stage: str, what: str) -> None:
        """One line per run: the time and what ran, without padding (a log or a pipe keeps it whole)."""
        self.console.print(f"[dim]{datetime.now():%H:%M:%S}[/] {stage}: {escape(what)}", highlight=False)
        if self._bar is not None:
            self._bar()

    @contextmanager
    def _showing_progress(self, report: FlowReport, before: ProgressMark) -> Iterator[None]:
        """On a terminal, a bar of the arrivals taken since ``before`` under the run lines (gone when
        done); in a pipe or a log, the run lines alone."""
        if not self.console.is_terminal:
            yield
            return
        arrived, settled, stage_b = before.arrived, before.settled, before.stage_b
        columns = (
            SpinnerColumn(),
            TextColumn("arrivals"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[runs]}"),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=self.console, transient=True) as progress:
            task = progress.add_task("arrivals", total=report.arrived - arrived, runs="")

            def update() -> None:
                total = report.arrived - arrived
                progress.update(
                    task,
                    total=total,
                    completed=min(total, report.settled - settled),
                    runs=f"stage B runs {len(report.stage_b) - stage_b}",
                )

            self._bar = update
            try:
                yield
            finally:
                self._bar = None

    def __enter__(self) -> LocalProject:
        # The standard OpenLineage configuration (openlineage.yml, OPENLINEAGE_*), read before anything
        # starts so that a bad one fails at once; the functions of the flow read the same sources.
        openlineage = load_openlineage_settings(os.environ, cwd=Path.cwd(), home=Path.home())
        # A damaged or missing state is found before anything starts, let alone writes.
        kept = self.workspace.read_pipeline_state()
        if not self.state_file.exists():
            # Kept from the start, so that a missing state means a deleted one, never a first run stopped
            # before its first save.
            write_json(self.state_file, kept)
        with self.console.status("starting embedded Spark and a local AWS endpoint (moto server on 127.0.0.1)"):
            self.engine = open_engine(self.workspace, lambda moved: self.console.print(escape(moved), soft_wrap=True))
            self.cloud = LocalCloud.start()
            self.cloud.restore_pipeline_state(self.state_file, kept)
        if self.unsaved_marker.exists():
            # The last command was killed before it saved its state: what its runs published is undone, so
            # its batch runs again whole over the state it started from.
            commits = PartitionCommits(self.cloud.dynamodb, self.cloud.names.pipeline_state, lists=LocalObjectStore())
            zones = [self.workspace.stage_dir, self.workspace.analytics_dir]
            with self.console.status("undoing what the last (killed) run left before it saved its state"):
                undone = undo_unsaved_runs(self.engine, commits, LocalObjectStore(), zones)
            if undone:
                self.console.print(f"the last run was stopped before it saved its state: {undone.described()}")
        write_json(self.unsaved_marker, {"pid": os.getpid(), "started": time.time()})
        # Whatever this run does, the last clean run's record no longer describes the workspace.
        Settled.forget(self.settled_file)
        self.flow = EventFlow(
            self.cloud,
            self.engine,
            self.workspace,
            self.settings,
            self.config.queries,
            listener=self._progress,
            openlineage=openlineage,
        )
        return self

    @property
    def raw_dir(self) -> Path:
        return self.workspace.raw_dir

    @property
    def state_file(self) -> Path:
        return self.workspace.pipeline_state_file

    @property
    def settled_file(self) -> Path:
        return self.workspace.root / "state" / "settled.json"

    def snapshot(self, keys: list[str]) -> Settled:
        return project_snapshot(self.config, self.workspace.raw_dir, keys)

    def nothing_new(self, now: Settled) -> bool:
        """Whether the last clean run processed exactly these raw files, with these inputs, and the
        pipeline state it left reads back whole (``WorkspaceDamaged`` if not: never "nothing new" over a
        state that a run could not start from)."""
        if Settled.load(self.settled_file) != now or self.unsaved_marker.exists():
            return False
        self.workspace.read_pipeline_state()
        return True

    def carry_failures(self, report: FlowReport) -> list[str]:
        """Keep this run's failures and the earlier ones it did not resolve (``lakeline.project.unresolved``);
        returns the earlier ones still unresolved."""
        loaded = {key for plan in report.stage_a for key in plan.arrival_keys}
        built = {StageBMessage.model_validate(plan.message).node for plan in report.stage_b}
        return carry_unresolved(self.workspace.root, report.failures, loaded, built)

    def conclude(self, seen: Settled, report: FlowReport) -> list[str]:
        """After a full run: ``carry_failures``, and record the run as settled if it was clean and no
        earlier failure remains. Returns the earlier failures still unresolved."""
        earlier = self.carry_failures(report)
        if not (report.failures or report.quarantined or earlier):
            copies = {key: file_digest(self.workspace.raw_dir / key) for key in report.copies}
            Settled(seen.inputs, {**seen.files, **copies}).save(self.settled_file)
        return earlier

    def __exit__(self, _kind: object, error: BaseException | None, _trace: object) -> None:
        if self.cloud is None:
            return
        try:
            # After a full disk, the state is kept as it was before the batch: the runs that wrote since are
            # undone by the next run (``lakeline.runtimes.embedded.unsaved_runs``), which loads their arrivals again.
            if error is None or full_disk(error, self.workspace.root) is None:
                self.cloud.save_pipeline_state(self.state_file)
                self.unsaved_marker.unlink(missing_ok=True)
        finally:
            self.cloud.stop()

    @property
    def unsaved_marker(self) -> Path:
        """There while a command runs the pipeline: found at the start of the next one, it says the last
        was killed before it saved its state (``lakeline.runtimes.embedded.unsaved_runs``)."""
        return self.workspace.root / "state" / "running.json"

    @property
    def started_cloud(self) -> LocalCloud:
        if self.cloud is None:
            raise RuntimeError("use LocalProject as a context manager")
        return self.cloud

    @property
    def started_flow(self) -> EventFlow:
        if self.flow is None:
            raise RuntimeError("use LocalProject as a context manager")
        return self.flow

    def prepare(self, extra_items: list[DependencyItem] | None = None) -> None:
        """Run the table DDL files and register the dependency items."""
        flow = self.started_flow
        for path in self.config.tables:
            text = path.read_text()
            for name, value in (("$analytics_root", self.workspace.analytics_dir), ("$workspace", self.workspace.root)):
                text = text.replace(name, str(value))
            for statement in sqlglot.parse(text, read="athena"):
                if statement is not None:
                    flow.engine.execute(statement.sql("athena"))
        self.items = [*load_items(self.config.dependencies), *(extra_items or [])]
        if self.items:
            flow.register(self.items)
            self.console.print(f"registered {len(self.items)} dependency items")

    def raw_folder_tables(self) -> list[str]:
        """The stage table of each table folder of the raw folder (``<team>/<dataset>/<table>/``)."""
        tables = []
        for folder in sorted(self.workspace.raw_dir.glob("*/*/*")):
            team, dataset, table = folder.relative_to(self.workspace.raw_dir).parts
            if folder.is_dir() and not any(part.startswith((".", "_")) for part in (team, dataset, table)):
                with suppress(InvalidInputError):  # not a table folder: its files are reported as arrivals
                    tables.append(f"{self.settings.stage_database(team, dataset)}.{check_identifier(table, 'table')}")
        return tables

    def raw_keys(self) -> list[str]:
        """Every file under the raw folder that is an arrival (others are reported and left alone)."""
        return raw_keys(self.workspace.raw_dir, self.console)

    def process(self, keys: list[str], digests: Mapping[str, str] | None = None) -> FlowReport:
        """Every file of ``keys`` arrives (``digests``: their contents' SHA-256, if read already), then
        the flow runs until nothing is left to do."""
        flow = self.started_flow
        before = ProgressMark.of(flow.report)
        for key in self._make_tables(keys):
            flow.arrive(key, (digests or {}).get(key))
        with self._showing_progress(flow.report, before):
            report = flow.run_until_idle()
        if self.cloud is not None:
            self.cloud.save_pipeline_state(self.state_file)
        return report

    def _make_tables(self, keys: list[str]) -> list[str]:
        """The raw and stage tables of the table folders of ``keys`` made from their first files before any
        arrives, as the local deployment's runs make them: a table whose first file cannot be typed or whose
        DDL fails is that table's failure, its files quarantined with the reason (not sent; the next run tries
        them again). Returns the keys whose tables are there."""
        flow, refused = self.started_flow, {}
        for folder, raw in first_files(keys).items():
            try:
                ensure_tables(flow.engine, raw, self.workspace.raw_dir / raw.key, self.settings)
            except table_errors() as error:
                if (full := full_disk(error, self.workspace.root)) is not None:
                    raise full from None  # not the table's fault: nothing more can be written
                refused[folder] = table_refusal(self.settings.raw_database(raw.team, raw.dataset), raw, error)
                flow.report.refused_tables.append(refused[folder])
        taken, parked = split_by_table(keys, refused)
        for key, reason in parked:
            flow.quarantine.park(key, reason)
            flow.report.quarantined.append(f"{key}: {reason}")
            self._progress("quarantined", f"{key}: {reason}")
        return taken

    def resend(self, keys: list[str], run: str) -> FlowReport:
        """Send raw files through stage A again as new versions of themselves (the local counterpart of
        copying an S3 object onto itself): their partitions are rebuilt from all their files."""
        digests = {
            key: hashlib.sha256(f"{file_digest(self.workspace.raw_dir / key)}:{run}".encode()).hexdigest()
            for key in keys
        }
        return self.process(keys, digests)

    def finish(self, started: float) -> ProjectRun:
        """Trace and archive the lineage, query it, write lineage.html and the summary."""
        flow = self.started_flow
        with self.console.status("nightly trace: lineage table → archive"):
            archived = flow.trace()
            flow.write_openlineage()
        with self.console.status("querying the archived lineage (athena_queries/lineage/lineage_records.sql)"):
            result = query_local_archive(flow.engine, self.workspace.root / "lineage-archive", load_query())
        html = write_lineage_html(load_all_events(self.workspace), self.workspace.root / "lineage.html")
        run = ProjectRun(self.workspace, flow.report, archive_objects=len(archived), html=html)
        run.archived_lineage_rows = len(result.rows)
        datasets = sorted(
            {
                *stage_tables(flow.report),
                *self.raw_folder_tables(),  # loaded by an earlier run too (a reference table, say)
                *(item.dataset for item in self.items),
                *(source for item in self.items for source in item.source_tables),
            }
        )
        for dataset in datasets:
            database, table = dataset.split(".")
            if flow.engine.table_exists(database, table):
                run.tables.extend(table_summary(flow.engine, database, table))
        for item in self.items:
            if flow.engine.table_exists(*item.dataset.split(".")):
                schema = flow.engine.describe_table(*item.dataset.split("."))
                width = len(schema.columns) + len(schema.partition_columns)
                order = ", ".join(str(position) for position in range(1, min(width, 2) + 1))
                rows = flow.engine.execute(f"SELECT * FROM {item.dataset} ORDER BY {order}").rows
                run.contents[item.dataset] = [list(row) for row in rows]
        run.seconds = time.monotonic() - started
        write_summary(run)
        print_summary(run, self.console)
        return run


def stage_tables(report: FlowReport) -> list[str]:
    return [f"{plan.target_database}.{plan.table}" for plan in report.stage_a]


def load_all_events(workspace: Workspace) -> list[dict[str, Any]]:
    path = workspace.root / "lineage" / "openlineage.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def table_summary(engine: SparkEngine, database: str, table: str) -> list[dict[str, Any]]:
    """Rows and data files of every partition of a table; one line for an unpartitioned table."""
    store = LocalObjectStore()
    schema = engine.describe_table(database, table)
    if not schema.partition_columns:
        files = store.list_data_files(schema.location) if schema.location else []
        count = partition_row_count(engine, database, table, {})
        return [{"table": f"{database}.{table}", "partition": "", "rows": count, "files": len(files)}]
    # Rows of every partition in one query, not one per partition (a rerun with nothing to do is quick).
    names = ", ".join(dml_name(column.name) for column in schema.partition_columns)
    grouped = engine.execute(f"SELECT {names}, count(*) FROM {dml_name(database, table)} GROUP BY {names}").rows
    counts = {tuple(str(value) for value in row[:-1]): int(row[-1]) for row in grouped}
    rows: list[dict[str, Any]] = []
    for (spec,) in engine.session.sql(f"SHOW PARTITIONS {ddl_name(database, table)}").collect():
        # SHOW PARTITIONS prints the partition's path: values are %-escaped as in the folder names.
        partition = {name: unquote(value) for name, value in (part.split("=", 1) for part in str(spec).split("/"))}
        count = counts.get(tuple(partition[column.name] for column in schema.partition_columns), 0)
        location = engine.partition_location(database, table, partition)
        files = store.list_data_files(location) if location else []
        rows.append({"table": f"{database}.{table}", "partition": str(spec), "rows": count, "files": len(files)})
    return rows


def write_summary(run: ProjectRun) -> Path:
    path = run.workspace.root / "summary.json"
    report = run.report
    path.write_text(
        json.dumps(
            {
                "tables": run.tables,
                "contents": run.contents,
                "stage_a_runs": len(report.stage_a),
                "stage_b_runs": len(report.stage_b),
                "duplicates": report.duplicates,
                "failures": report.failures,
                "quarantined": report.quarantined,
                "refused_tables": report.refused_tables,
                "read_by_name": report.read_by_name,
                "lineage_records": report.lineage_records,
                "quality": report.quality,
                "archive_objects": run.archive_objects,
                "archived_lineage_rows": run.archived_lineage_rows,
                "seconds": round(run.seconds, 1),
            },
            indent=1,
            default=str,
        )
    )
    return path


def print_summary(run: ProjectRun, console: Console) -> None:
    summary = Table(title="tables")
    for column in ("table", "partition", "rows", "files"):
        summary.add_column(column, justify="right" if column in ("rows", "files") else "left")
    for row in run.tables:
        summary.add_row(row["table"], row["partition"] or "(unpartitioned)", str(row["rows"]), str(row["files"]))
    print_whole(console, summary)
    report = run.report
    console.print(
        f"stage A runs: {len(report.stage_a)}, stage B runs: {len(report.stage_b)}, "
        f"duplicates skipped: {len(report.duplicates)}, failed: {len(report.failures)}, "
        f"quarantined: {len(report.quarantined)}, "
        f"lineage records loaded: {report.lineage_records}, archive objects: {run.archive_objects}, "
        f"archived lineage rows: {run.archived_lineage_rows}"
    )
    for failure in report.failures:
        console.print(f"[red]failed[/] {escape(failure)}", soft_wrap=True)  # one line, as written
    for refused in report.quarantined:
        console.print(f"[red]quarantined[/] {escape(refused)}", soft_wrap=True)
    for copied in report.read_by_name:
        console.print(f"read by name (columns in another order) {escape(copied)}", soft_wrap=True)
    if report.quarantined:
        console.print(
            f"the reasons are also in {Quarantine.of(run.workspace.root).root}; fix a file and run again to load it"
        )
    console.print(f"lineage picture: {run.html}")
    console.print(f"done in {run.seconds:.0f}s")


class Watched(Protocol):
    """What ``watch`` runs: a project whose raw folder it looks at and which processes the new files."""

    console: Console

    def raw_keys(self) -> list[str]: ...

    @property
    def raw_dir(self) -> Path: ...

    def process(self, keys: list[str]) -> object: ...


def watch(
    project: Watched,
    *,
    poll_seconds: float = 2.0,
    max_seconds: float | None = None,
    settle_seconds: float = 1.0,
    stop: Callable[[], bool] = lambda: False,
) -> None:
    """Process files as they land in the raw folder (each key and modification time once)."""
    seen: dict[str, float] = {}
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    project.console.print(f"watching {project.raw_dir} (Ctrl-C to stop)")
    while not stop() and (deadline is None or time.monotonic() < deadline):
        fresh = []
        for key in project.raw_keys():
            mtime = (project.raw_dir / key).stat().st_mtime
            if time.time() - mtime < settle_seconds:
                continue  # still being written
            if seen.get(key) != mtime:
                seen[key] = mtime
                fresh.append(key)
        if fresh:
            project.process(fresh)
        time.sleep(poll_seconds)
