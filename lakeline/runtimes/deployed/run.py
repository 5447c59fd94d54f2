"""A project run on the system users deploy, stood up on this machine (``lakeline run``, ``watch`` and
``lakeline demo``): the CDK app synthesized with the project's settings and deployed on a local AWS endpoint
with IAM enforced (``lakeline.runtimes.deployed.local_aws.system``), then operated as a team operates a deployment:

1. the tables: each raw table folder's raw and stage tables, unless the project's DDL creates them, are
   created with Athena DDL inferred from its first file (written to ``deployed/sources.sql`` in the
   workspace: what to run in Athena before the first arrival in AWS); then the project's own DDL
   (``$analytics_root``, ``$stage_root``, ``$raw_root`` are the buckets);
2. the project's queries folder uploaded where stage B reads step SQL files, the dependency items put
   into the dependencies table;
3. the raw files uploaded into the raw bucket: S3's events go through the EventBridge rule, queue A and
   the routers to the state machines; each execution is printed as it ends;
4. the nightly lineage schedule invoked; the archive bucket copied into the workspace and queried with
   Athena; every stage and target table's partitions counted; ``summary.json`` and ``lineage.html``.

What a run leaves is under ``<workspace>/deployed/`` (its results, the S3 mirror, the functions' logs, the
tables' DDL), apart from what the local runtime keeps in the same workspace.

The endpoint lives as long as the command. A project's deployment (``lakeline run``, ``watch``)
lives on in ``deployed/state/`` instead (``lakeline.runtimes.deployed.local_aws.kept_state``): what its buckets, tables,
catalog and dead-letter queues hold is kept after each batch of uploads and at the end, and put back into
the next command's deployment, so a rerun uploads only the raw files that are new or changed since they
were uploaded (by content), as a team uploads its new files to the deployment in AWS. A run that fails
midway keeps nothing: the next starts from the state before it and uploads its files again. ``lakeline
demo`` starts afresh each time.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lakeline.console import counted, print_whole
from lakeline.dependencies.files import load_items
from lakeline.dependencies.model import DependencyItem
from lakeline.engines.spark import SparkEngine
from lakeline.lineage.openlineage.archive import EVENTS_FOLDER
from lakeline.lineage.records.archive import ARCHIVE_PREFIX
from lakeline.lineage.records.archive_table import DEFAULT_TABLE
from lakeline.lineage.records.query import bind_archive_table, load_query
from lakeline.lineage.viewer.html import write_lineage_html
from lakeline.names import ddl_name
from lakeline.operations.status import STACK_OUTPUTS
from lakeline.project.catalog import first_files, split_by_table, table_errors, table_refusal
from lakeline.project.config import ProjectConfig, project_snapshot, raw_keys
from lakeline.project.quarantine import Quarantine
from lakeline.project.relocation import claim_workspace, open_engine
from lakeline.project.settled import Settled, file_digest
from lakeline.project.workspace import Workspace
from lakeline.repository import REPOSITORY
from lakeline.runtimes.deployed.local_aws import kept_state, timings
from lakeline.runtimes.deployed.local_aws.executions import ExecutionRecord, check_interpreter
from lakeline.runtimes.deployed.local_aws.system import DeployedSystem, stood_up, synthesize_cached
from lakeline.runtimes.deployed.operator import Operator
from lakeline.runtimes.deployed.source_ddl import source_table_ddl
from lakeline.runtimes.deployed.tables import summarized_tables
from lakeline.storage import SchemeObjectStore
from stage_end.quality import read_report, report_to_dict

DATABASE_PREFIX = "deployed__"  # the local Athena's Spark databases, apart from `lakeline run`'s own


def synth_context(config: ProjectConfig) -> dict[str, Any]:
    """The CDK context of the project's deployment: its environment and table settings; the trace takes
    the runs at once (nothing else writes to them)."""
    return {
        "environment": config.environment or "dev",
        "engine": "athena",
        "trace_settle_seconds": "0",
        "default_table_settings": config.default_table.model_dump(mode="json"),
        "table_settings": {name: value.model_dump(mode="json") for name, value in config.tables_settings.items()},
    }


@dataclass
class DeployedRun:
    results: Path  # <workspace>/deployed
    uploads: int = 0
    unchanged: int = 0
    """Raw files not uploaded: uploaded with the same content by an earlier command."""
    stage_a: list[ExecutionRecord] = field(default_factory=list)
    stage_b: list[ExecutionRecord] = field(default_factory=list)
    parked: dict[str, list[str]] = field(default_factory=dict)
    """Each dead-letter queue with messages parked by this command → their reasons."""
    parked_before: dict[str, list[str]] = field(default_factory=dict)
    """Each dead-letter queue with messages an earlier command parked (kept) → their reasons."""
    quarantined: list[str] = field(default_factory=list)
    """``key: reason`` of each raw file not uploaded: its table could not be made (``Quarantine.of_deployment``)."""
    refused_tables: list[str] = field(default_factory=list)
    """Why each table this command could not make was not made (one line each, naming the table)."""
    tables: list[dict[str, Any]] = field(default_factory=list)
    contents: dict[str, list[list[Any]]] = field(default_factory=dict)
    """Each dependency item's table, all of its rows (read with Athena)."""
    lineage_records: int = 0
    quality: list[dict[str, Any]] = field(default_factory=list)
    """The quality report of each execution that ran checks and published (#41); a blocked one's rules are in its
    failed execution's cause (its report went with its run's prefix)."""
    archive_objects: int = 0
    archived_lineage_rows: int = 0
    events: int = 0
    html: Path | None = None
    seconds: float = 0.0

    @property
    def nothing_new(self) -> list[ExecutionRecord]:
        """Stage A executions that wrote nothing: a repeated delivery of an arrival already loaded."""
        return [record for record in self.stage_a if not any(":athena:" in task.resource for task in record.tasks)]

    @property
    def failed(self) -> list[ExecutionRecord]:
        return [record for record in (*self.stage_a, *self.stage_b) if record.status != "SUCCEEDED"]

    @property
    def clean(self) -> bool:
        return not self.failed and not any(self.parked.values()) and not self.quarantined


class DeployedProject:
    """A project's deployment, stood up on this machine while the context is entered; ``keep_state``: put
    back what the last command's deployment held and keep what this one holds (``deployed/state/``)."""

    def __init__(
        self,
        config: ProjectConfig,
        console: Console,
        *,
        keep_state: bool = True,
        keep_results: bool = False,
        port: int | None = None,
    ) -> None:
        """``keep_results``: leave the last run's results, logs and mirror in ``deployed/`` (a command that
        only looks, ``lakeline sql``, writes no results of its own); ``port``: the endpoint's (default: a free
        one)."""
        self.port = port
        self.config = config
        self.keep_state = keep_state
        self.keep_results = keep_results
        self.console = console
        self.environment = config.environment or "dev"
        self.workspace = Workspace.at(config.workspace, config.raw)
        self.settings = self.workspace.settings(
            environment=config.environment, default_table=config.default_table, tables=config.tables_settings
        )
        self.items: list[DependencyItem] = []
        self._stack = ExitStack()
        self._system: DeployedSystem | None = None
        self._engine: SparkEngine | None = None
        self._uploads = 0
        self._unchanged = 0
        self.uploaded: dict[str, str] = {}
        """Each raw key uploaded (by this or an earlier command) → its content's SHA-256."""
        self._parked_before: dict[str, list[str]] = {}
        self.quarantine = Quarantine.of_deployment(self.workspace.root)
        self._quarantined: list[str] = []
        self._refused_tables: list[str] = []

    @property
    def state_folder(self) -> Path:
        return self.workspace.root / "deployed" / "state"

    def require_kept(self) -> None:
        """Fail, saying what to run, unless an earlier command kept this project's deployment."""
        kept_state.require(self.state_folder)

    @property
    def settled_file(self) -> Path:
        return self.workspace.root / "deployed" / "settled.json"

    def snapshot(self, keys: list[str]) -> Settled:
        """As the local runtime's, with what is deployed besides the code: the CDK app and the stacks' query files."""
        deployed = [
            REPOSITORY / name for name in ("stacks", "app.py", "cdk.json", "athena_queries", "package-lock.json")
        ]
        return project_snapshot(self.config, self.workspace.raw_dir, keys, also=[p for p in deployed if p.exists()])

    def nothing_new(self, now: Settled) -> bool:
        """Whether the last run, clean and kept, uploaded exactly these raw files, with these inputs."""
        if not kept_state.exists(self.state_folder) or Settled.load(self.settled_file) != now:
            return False
        kept_state.check(self.state_folder)  # "nothing new" only over a state that reads back whole
        return True

    def settle(self, seen: Settled, run: DeployedRun) -> None:
        """Record ``seen`` as settled if ``run`` was clean and nothing earlier is parked."""
        if run.clean and not run.parked_before:
            seen.save(self.settled_file)

    def __enter__(self) -> DeployedProject:
        root = self.workspace.root
        check_interpreter()  # before a minute goes into synth and deploy

        def notify(moved: str) -> None:
            self.console.print(escape(moved), soft_wrap=True)

        claim_workspace(self.workspace, notify)  # before anything in the workspace is touched
        if self.keep_state:  # the workspace is this command's now: a keep caught between its renames is undone
            kept_state.recover(self.state_folder)
            kept_state.check(self.state_folder)  # a damaged state is refused before a minute of stand-up
        # What an earlier run's deployment had goes (its S3 mirror, its logs, its results), apart from
        # its kept state and the DDL of the tables in it, when this run takes that state up.
        kept = ("state", "sources.sql") if self.keep_state and kept_state.exists(self.state_folder) else ()
        for child in (root / "deployed").glob("*") if (root / "deployed").is_dir() else []:
            # The quarantine stays: its files were never uploaded, so no kept state holds them.
            if child != self.quarantine.root and child.name not in kept and not (self.keep_results and kept):
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        self.quarantine.prune(self.workspace.raw_dir)
        # Spark's start (a JVM) and synth and deploy (Node, and moto in this process) take their own while
        # the other runs: Spark starts on a thread, and the local Athena takes it once the stacks are up.
        starting = ThreadPoolExecutor(1, thread_name_prefix="spark-start")
        spark = starting.submit(self._start_engine, notify)
        starting.shutdown(wait=False)

        def started_engine() -> SparkEngine:
            with timings.phase("waiting for Spark's start"):
                return spark.result()

        try:
            with self.console.status("cdk synth: the CDK app as users deploy it"), timings.phase("synth"):
                assembly = synthesize_cached(root / "cdk.out", synth_context(self.config))
            with (
                self.console.status("deploying the cloud assembly on a local AWS endpoint (moto), IAM enforced"),
                timings.phase("stand-up (deploy, hosts)"),
            ):
                self._system = self._stack.enter_context(
                    stood_up(
                        assembly,
                        started_engine,
                        root / "deployed",
                        database_prefix=DATABASE_PREFIX,
                        stable_names=self.keep_state,
                        port=self.port,
                    )
                )
            engine = spark.result()
            self._engine = engine
            self.operator = Operator(self._system.deployment, self.environment)
            if self.keep_state and kept_state.exists(self.state_folder):
                with (
                    self.console.status(f"putting back the deployment's state kept in {self.state_folder}"),
                    timings.phase("state put back"),
                ):
                    restored = kept_state.restore(self._system.deployment, self.state_folder)
                    self.uploaded = dict(kept_state.kept_extra(self.state_folder).get("uploads", {}))
                    self._parked_before = self.operator.parked()
                self.console.print(f"put back the state the last run kept: {restored.described()}")
        except BaseException:
            self._stack.close()  # the endpoint, IAM and the hosts' patches go with the failed start
            if spark.exception() is None:
                spark.result().stop()
            raise
        return self

    def _start_engine(self, notify: Callable[[str], None]) -> SparkEngine:
        """The workspace's Spark, with no local Athena database left by an earlier command."""
        with timings.phase("Spark start"):
            engine = open_engine(self.workspace, notify)
            _drop_local_athena_databases(engine)
            return engine

    def __exit__(self, *_: object) -> None:
        with self.console.status("stopping the deployment"), timings.phase("stop"):
            self._stack.close()
            if self._engine is not None:
                # The local Athena's tables are made from Glue at each query: none is worth keeping, and a
                # workspace moved elsewhere would otherwise report them as left at the old place.
                _drop_local_athena_databases(self._engine)

    @property
    def system(self) -> DeployedSystem:
        if self._system is None:
            raise RuntimeError("use DeployedProject as a context manager")
        return self._system

    @property
    def engine(self) -> SparkEngine:
        if self._engine is None:
            raise RuntimeError("use DeployedProject as a context manager")
        return self._engine

    @property
    def raw_dir(self) -> Path:
        return self.workspace.raw_dir

    def raw_keys(self) -> list[str]:
        """Every file under the raw folder that is an arrival (others are reported and left alone)."""
        return raw_keys(self.workspace.raw_dir, self.console)

    def prepare(self) -> None:
        """The project's tables (its DDL), the step SQL files and the dependency items."""
        operator = self.operator
        with self.console.status("creating the tables with Athena DDL"), timings.phase("tables, queries, items"):
            for path in self.config.tables:
                count = operator.run_ddl(path.read_text(), str(path))
                self.console.print(f"ran {counted(count, 'Athena DDL statement', 'Athena DDL statements')} of {path}")
        uploaded = operator.upload_queries(self.config.queries)
        if uploaded:
            self.console.print(
                f"uploaded {counted(uploaded, 'step SQL file', 'step SQL files')} of {self.config.queries}"
            )
        self.items = load_items(self.config.dependencies)
        if self.items:
            operator.put_items(self.items)
            self.console.print(
                f"put {counted(len(self.items), 'dependency item', 'dependency items')} into "
                f"{operator.outputs['DependenciesTable']}"
            )

    def prepare_sources(self) -> None:
        """The raw and stage tables of every table folder of the raw folder that Glue lacks, as ``process`` makes
        them before it uploads: for ``lakeline up``, whose arrivals come through the endpoint from any client."""
        with timings.phase("source tables"):
            self._create_source_tables(self.raw_keys())

    def process(self, keys: list[str], *, again: bool = False) -> None:
        """Upload each raw file of ``keys`` (in that order), its table's raw and stage tables made first if
        Glue has neither; then wait until the deployment is at rest, and keep its state. With a kept state,
        a file uploaded before with the same content is not uploaded again, unless ``again``."""
        digests = {key: file_digest(self.workspace.raw_dir / key) for key in keys} if self.keep_state else {}
        if self.keep_state and not again:
            fresh = [key for key in keys if self.uploaded.get(key) != digests[key]]
            if len(fresh) < len(keys):
                self._unchanged += len(keys) - len(fresh)
                self.console.print(
                    f"{len(keys) - len(fresh)} raw files are in the deployment as they are (uploaded by an earlier "
                    "run); not uploaded again"
                )
            keys = fresh
        with timings.phase("source tables"):
            keys = self._create_source_tables(keys)
        if not keys:
            return
        with _reporting(self.system, self.console), timings.phase("uploads until at rest"):
            # The uploads are one burst: queue A's batching window gathers their arrivals as it would in AWS, so
            # a partition's files uploaded together make one run (``Pollers.gathering``).
            with self.system.functions.pollers.gathering():
                for key in keys:
                    self.operator.upload(self.workspace.raw_dir, key)
                    self.quarantine.release(key)
                    self._uploads += 1
                    if key in digests:
                        self.uploaded[key] = digests[key]
                    self.console.print(f"[dim]{datetime.now():%H:%M:%S}[/] uploaded {key}", highlight=False)
            self.system.executions.wait(timeout=3600)
        self.keep()

    def redrive(self, dead_letters: str, target: str) -> tuple[int, int]:
        """``lakeline dlq redrive`` on the deployment: the messages of the DLQ output ``dead_letters`` (a
        ``status.STACK_OUTPUTS`` name) sent back to the queue ``target``, then the deployment at rest and its
        state kept. How many were sent, and how many were kept (not redrivable)."""
        from lakeline.operations.dead_letters import redrive

        outputs = self.operator.named_outputs
        with self.acting(keep=False):
            sent, kept = redrive(self.operator.deployment.client("sqs"), outputs[dead_letters], outputs[target])
            self.console.print(f"sent {sent} parked messages back to their queue")
        # What this command parks is what is parked now beyond what it left in the DLQs: the other DLQs' messages
        # and the ones it did not send (unroutable); a message that fails again is parked by this command.
        queue = STACK_OUTPUTS[dead_letters].removesuffix("DeadLetterQueueUrl")
        left = {queue: [letter.reason for letter in kept]} if kept else {}
        self._parked_before = {
            **{name: reasons for name, reasons in self._parked_before.items() if name != queue},
            **left,
        }
        self.keep()
        return sent, len(kept)

    @contextmanager
    def acting(self, *, keep: bool = True) -> Iterator[Operator]:
        """Around what a command does to the deployment as a team would in AWS (messages sent, objects put):
        each execution it sets going printed as it ends; then the deployment at rest and (``keep``) kept."""
        with _reporting(self.system, self.console):
            yield self.operator
            self.system.executions.wait(timeout=3600)
        if keep:
            self.keep()

    def keep(self) -> None:
        """Keep what the deployment holds in ``deployed/state/`` (with the raw files' digests uploaded)."""
        Settled.forget(self.settled_file)  # what the last clean run left is no longer what is kept
        if self.keep_state:
            with (
                self.console.status(f"keeping the deployment's state in {self.state_folder}"),
                timings.phase("keep state"),
            ):
                kept_state.keep(self.system.deployment, self.state_folder, extra={"uploads": self.uploaded})

    def _create_source_tables(self, keys: list[str]) -> list[str]:
        """The raw and stage tables Glue lacks of the table folders of ``keys``, inferred from their first
        files; their DDL is kept in ``deployed/sources.sql`` (what to run in Athena before going to AWS).
        A table whose first file cannot be typed or whose DDL fails is that table's failure: its files are
        quarantined with the reason and not uploaded (the next run tries them again). Returns the keys
        whose tables are there."""
        settings, refused = self.settings, {}
        for folder, raw in first_files(keys).items():
            databases = settings.raw_database(raw.team, raw.dataset), settings.stage_database(raw.team, raw.dataset)
            existing = {f"{db}.{raw.table}" for db in databases if self.operator.table_exists(db, raw.table)}
            if len(existing) == 2:
                continue
            with self.console.status(f"creating the raw and stage tables of {folder} from its first file"):
                try:
                    ddl = source_table_ddl(self.engine, self.workspace.raw_dir, raw, settings, existing)
                    count = self.operator.run_ddl(ddl, f"of {folder}, inferred from {raw.key}")
                except table_errors() as error:
                    refused[folder] = table_refusal(settings.raw_database(raw.team, raw.dataset), raw, error)
                    self._refused_tables.append(refused[folder])
                    continue
            path = self.workspace.root / "deployed" / "sources.sql"
            with path.open("a") as kept:
                kept.write(ddl)
            self.console.print(
                f"created the tables of {folder} with {counted(count, 'Athena statement', 'Athena statements')} "
                f"(their DDL: {path})"
            )
        taken, parked = split_by_table(keys, refused)
        for key, reason in parked:
            self.quarantine.park(key, reason)
            self._quarantined.append(f"{key}: {reason}")
            self.console.print(f"[red]quarantined[/] {escape(key)}: {escape(reason)}", soft_wrap=True)
        return taken

    def executions(self) -> tuple[list[ExecutionRecord], list[ExecutionRecord]]:
        """The stage A and the stage B executions the deployment ran, in the order they started."""
        records = list(self.system.executions.records.values())
        outputs = self.operator.outputs
        machine_a, machine_b = outputs["StageAStateMachineArn"], outputs["StageBStateMachineArn"]
        return (
            [record for record in records if _machine(record.arn) == machine_a],
            [record for record in records if _machine(record.arn) == machine_b],
        )

    def copy_lineage(self) -> Path:
        """The lineage archive and OpenLineage events copied into the workspace (``copy_lineage``) and the
        lineage picture made from them, as at the end of ``lakeline run``; returns the picture's path."""
        with self.console.status("copying the lineage archive and events into the workspace"):
            _, events = copy_lineage(self.operator, self.workspace)
            return write_lineage_html(events, self.workspace.root / "deployed" / "lineage.html")

    def trace(self) -> None:
        """The nightly lineage trace, as its schedule starts it: the lineage table's roots traced and staged;
        then the compaction, as its hourly schedule starts it, folds them into the archive."""
        with self.console.status("nightly lineage trace: lineage table → archive"), timings.phase("lineage trace"):
            self.operator.invoke("LineageSchedule")
            self.system.executions.wait(timeout=3600)
            self.operator.invoke("LineageCompact")

    def finish(self, started: float) -> DeployedRun:
        """The nightly trace, what came out (executions, DLQs, tables, lineage), ``summary.json``."""
        operator, system = self.operator, self.system
        run = DeployedRun(self.workspace.root / "deployed", uploads=self._uploads, unchanged=self._unchanged)
        run.stage_a, run.stage_b = self.executions()
        run.quality = _quality_reports(operator, [*run.stage_a, *run.stage_b])
        self.trace()
        run.parked_before = self._parked_before
        run.parked = _parked_since(operator.parked(), self._parked_before)
        run.quarantined, run.refused_tables = self._quarantined, self._refused_tables
        with self.console.status("reading the lineage and the tables"), timings.phase("reading lineage and tables"):
            _lineage(operator, system, self.workspace, run)
            run.tables = summarized_tables(operator, self._datasets())
            for item in self.items:
                database, table = item.dataset.split(".")
                if not operator.table_exists(database, table):
                    continue  # a target no run could build: its failure is reported above
                entry = operator.deployment.client("glue").get_table(DatabaseName=database, Name=table)["Table"]
                width = len(entry["StorageDescriptor"].get("Columns", [])) + len(entry.get("PartitionKeys", []))
                order = ", ".join(str(position) for position in range(1, min(width, 2) + 1))
                rows = operator.athena(f"SELECT * FROM {item.dataset} ORDER BY {order}")
                run.contents[item.dataset] = [list(row) for row in rows]
        self.keep()
        run.seconds = time.monotonic() - started
        _write_summary(run)
        _print_summary(run, self.console)
        return run

    def _datasets(self) -> list[str]:
        """The stage tables of the raw folder's table folders and the items' targets and sources."""
        tables = set()
        for folder in sorted(self.workspace.raw_dir.glob("*/*/*")):
            team, dataset, table = folder.relative_to(self.workspace.raw_dir).parts
            if folder.is_dir() and not any(part.startswith((".", "_")) for part in (team, dataset, table)):
                tables.add(f"{self.settings.stage_database(team, dataset)}.{table}")
        tables |= {item.dataset for item in self.items}
        tables |= {source for item in self.items for source in item.source_tables}
        return sorted(tables)


@contextmanager
def _reporting(system: DeployedSystem, console: Console) -> Iterator[None]:
    """One line per execution as it ends, while the uploads' work runs."""
    done = threading.Event()
    reported: set[str] = set()

    def report() -> None:
        while True:
            finished = done.is_set()
            for record in list(system.executions.records.values()):
                if record.status != "RUNNING" and record.arn not in reported:
                    reported.add(record.arn)
                    colour = "green" if record.status == "SUCCEEDED" else "red"
                    what = f"[{colour}]{record.status.lower()}[/] {escape(record.arn.rsplit(':', 2)[-2])} "
                    what += escape(record.arn.rsplit(":", 1)[-1])
                    if record.error:
                        what += f": {escape(record.error)} {escape((record.cause or '')[:300])}"
                    console.print(f"[dim]{datetime.now():%H:%M:%S}[/] {what}", highlight=False, soft_wrap=True)
            if finished:
                return
            time.sleep(0.2)

    reporter = threading.Thread(target=report, name="demo-report", daemon=True)
    reporter.start()
    try:
        with console.status("the deployment at work: stage A, routing, stage B, lineage"):
            yield
    finally:
        done.set()
        reporter.join()


def _drop_local_athena_databases(engine: SparkEngine) -> None:
    for database in engine.session.catalog.listDatabases():
        if database.name.startswith(DATABASE_PREFIX):
            engine.execute(f"DROP DATABASE IF EXISTS {ddl_name(database.name)} CASCADE")


def _parked_since(parked: dict[str, list[str]], before: dict[str, list[str]]) -> dict[str, list[str]]:
    """The reasons in ``parked`` beyond those ``before`` (each DLQ's earlier messages taken out once)."""
    since = {}
    for queue, reasons in parked.items():
        left = list(reasons)
        for reason in before.get(queue, []):
            if reason in left:
                left.remove(reason)
        if left:
            since[queue] = left
    return since


def _machine(execution_arn: str) -> str:
    """The state machine ARN of an execution ARN."""
    prefix, machine, _name = execution_arn.rsplit(":", 2)
    return f"{prefix.replace(':execution', ':stateMachine')}:{machine}"


def _lineage(operator: Operator, system: DeployedSystem, workspace: Workspace, run: DeployedRun) -> None:
    """The lineage table's records; the archive bucket copied into the workspace (``copy_lineage``); the archive
    queried with Athena; the lineage picture."""
    deployment = system.deployment
    table = deployment.client("dynamodb").scan(TableName=_lineage_table(operator), Select="COUNT")
    run.lineage_records = int(table["Count"])
    run.archive_objects, events = copy_lineage(operator, workspace)
    run.events = len(events)
    query = bind_archive_table(load_query(), operator.lineage_database, DEFAULT_TABLE)
    run.archived_lineage_rows = len(operator.athena(query))
    run.html = write_lineage_html(events, workspace.root / "deployed" / "lineage.html")


def copy_lineage(operator: Operator, workspace: Workspace) -> tuple[int, list[dict[str, Any]]]:
    """The lineage archive bucket copied into the workspace, as ``aws s3 sync`` would: its traced trees into
    ``deployed/lineage-archive/`` (what ``lakeline lineage show`` reads), its OpenLineage events into
    ``deployed/lineage/openlineage.jsonl``. Returns how many archive objects, and the events in order."""
    s3 = operator.deployment.client("s3")
    archive = operator.buckets["lineagearchive"]
    copies = workspace.root / "deployed" / "lineage-archive"
    shutil.rmtree(copies, ignore_errors=True)
    events: list[dict[str, Any]] = []
    objects = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=archive):
        for entry in page.get("Contents", []):
            body = s3.get_object(Bucket=archive, Key=entry["Key"])["Body"].read()
            if entry["Key"].startswith(EVENTS_FOLDER):
                events.append(json.loads(body))
            elif entry["Key"].startswith(ARCHIVE_PREFIX):
                copy = copies / entry["Key"].removeprefix(ARCHIVE_PREFIX)
                copy.parent.mkdir(parents=True, exist_ok=True)
                copy.write_bytes(body)
                objects += 1
    # In time order; at one time a START first, an end event after the RUNNING parts sent before it (bound).
    events.sort(key=lambda event: (event["eventTime"], {"START": 0, "RUNNING": 1}.get(event["eventType"], 2)))
    stored = workspace.root / "deployed" / "lineage" / "openlineage.jsonl"
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_text("".join(json.dumps(event, sort_keys=True) + "\n" for event in events))
    return objects, events


def _quality_reports(operator: Operator, records: list[ExecutionRecord]) -> list[dict[str, Any]]:
    """The reports the quality step kept beside each checked run that published; read before the trace and the
    next runs' sweeps can delete a superseded version's prefix with its report."""
    store = SchemeObjectStore(operator.deployment.client("s3"))
    reports = []
    for record in records:
        plan = record.input.get("plan", {}) if isinstance(record.input, dict) else {}
        if record.status != "SUCCEEDED" or not plan.get("quality") or not plan.get("target_location"):
            continue
        report = read_report(store, plan["target_location"])
        if report is not None:
            reports.append(report_to_dict(report))
    return reports


def _lineage_table(operator: Operator) -> str:
    names = operator.deployment.client("dynamodb").list_tables()["TableNames"]
    (name,) = [name for name in names if "lineage" in name.lower()]
    return str(name)


def _write_summary(run: DeployedRun) -> Path:
    path = run.results / "summary.json"
    path.write_text(
        json.dumps(
            {
                "tables": run.tables,
                "contents": run.contents,
                "uploads": run.uploads,
                "unchanged_raw_files": run.unchanged,
                "stage_a_runs": len(run.stage_a),
                "stage_a_runs_with_nothing_new": len(run.nothing_new),
                "stage_b_runs": len(run.stage_b),
                "failed_executions": [
                    {"execution": record.arn, "error": record.error, "cause": record.cause} for record in run.failed
                ],
                "parked": run.parked,
                "parked_by_earlier_runs": run.parked_before,
                "quarantined": run.quarantined,
                "refused_tables": run.refused_tables,
                "lineage_records": run.lineage_records,
                "quality": run.quality,
                "archive_objects": run.archive_objects,
                "archived_lineage_rows": run.archived_lineage_rows,
                "openlineage_events": run.events,
                "seconds": round(run.seconds, 1),
            },
            indent=1,
            default=str,
        )
    )
    return path


def _print_summary(run: DeployedRun, console: Console) -> None:
    summary = Table(title="tables")
    for column in ("table", "partition", "rows", "files"):
        summary.add_column(column, justify="right" if column in ("rows", "files") else "left")
    for row in run.tables:
        summary.add_row(row["table"], row["partition"], str(row["rows"]), str(row["files"]))
    print_whole(console, summary)
    console.print(
        f"stage A executions: {len(run.stage_a)} ({len(run.nothing_new)} with nothing new), "
        f"stage B executions: {len(run.stage_b)}, "
        f"failed: {len(run.failed)}, parked: {sum(len(reasons) for reasons in run.parked.values())}, "
        f"quarantined: {len(run.quarantined)}, "
        f"lineage records: {run.lineage_records}, archive objects: {run.archive_objects}, "
        f"archived lineage rows: {run.archived_lineage_rows}, OpenLineage events: {run.events}"
    )
    for record in run.failed:
        console.print(f"[red]failed[/] {escape(record.arn)}: {escape(record.error or '')} {escape(record.cause or '')}")
    for queue, reasons in run.parked.items():
        for reason in reasons:
            console.print(f"[red]parked[/] in {queue}'s DLQ: {escape(reason)}", soft_wrap=True)
    for queue, reasons in run.parked_before.items():
        for reason in reasons:
            what = f"[yellow]still parked (an earlier run)[/] in {queue}'s DLQ: {escape(reason)}"
            console.print(what, soft_wrap=True)
    for refused in run.quarantined:
        console.print(f"[red]quarantined[/] {escape(refused)}", soft_wrap=True)
    if run.quarantined:
        console.print(
            f"not uploaded: the reasons are also in {Quarantine.of_deployment(run.results.parent).root}; fix the "
            "file (or write the table's DDL in the project's tables files) and run again to load them",
            soft_wrap=True,
        )
    if run.parked or run.parked_before:
        console.print(
            "a file fixed and put back in the raw folder arrives again at the next run; for another cause (a table, "
            "an item, a query), fix it, then `lakeline dlq redrive --queue stage-a` (or stage-b) sends "
            "the parked messages back; `lakeline dlq list` lists them",
            soft_wrap=True,
        )
    console.print(f"lineage picture: {run.html}")
    console.print(f"done in {run.seconds:.0f}s")
