"""The ``lakeline`` command line."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from lakeline.catalog_json import CatalogFile
from lakeline.cli.deps import deps_app
from lakeline.cli.glue import glue_app
from lakeline.cli.lineage import lineage_app
from lakeline.console import fail
from lakeline.engines.base import Column, QueryError, QueryResult, TableNotFound, TableSchema
from lakeline.errors import ConfigError, LakelineError
from lakeline.local.sql_server import DEFAULT_KEEP_MINUTES
from lakeline.settings import PipelineSettings

if TYPE_CHECKING:
    from lakeline.engines.spark import SparkEngine
    from lakeline.local.project import ProjectConfig
    from lakeline.local.sql_server import SqlClient
    from lakeline.local.workspace import Workspace
    from lakeline.operations.reprocess import Reprocessing
    from lakeline.operations.status import PipelineStatus

app = typer.Typer(
    help="Lakeline: an event-driven data lake pipeline with lineage.",
    epilog="Exit codes, for every command: 0 done; 1 the command ran and something failed, was refused or "
    "was left out (it says what); 2 the command could not run as asked (an option, a file, the "
    "configuration, or AWS).",
    no_args_is_help=True,
)
stage_a_app = typer.Typer(help="Stage A: raw arrivals into stage tables (CTAS-simulated inserts).")
app.add_typer(stage_a_app, name="stage-a")
app.add_typer(deps_app, name="deps")
app.add_typer(lineage_app, name="lineage")
app.add_typer(glue_app, name="glue")

err_console = Console(stderr=True)


def progress_console() -> Console:
    """The console of commands that report progress line by line: a time on each line but not the
    source line that printed it; in a pipe or a log, long lines stay whole instead of wrapping mid-value."""
    console = Console(log_path=False)
    console.soft_wrap = not console.is_terminal
    return console


def _moved(message: str) -> None:
    """A workspace opened where it was not made (``lakeline.local.relocation``) says so once."""
    err_console.print(escape(message), soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _table_settings(bucket_count: int | None, table_format: str | None, compression: str | None) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if bucket_count is not None:
        overrides["bucket_count"] = bucket_count
    if table_format is not None:
        overrides["format"] = table_format.upper()
    if compression is not None:
        overrides["compression"] = compression
    return overrides


def _project(config: Path | None) -> ProjectConfig | None:
    """The project ``config`` names, if it is a lakeline.yml (what ``lakeline run`` reads) rather than a
    pipeline settings file (``pipeline:``, or ``raw_root``/``stage_root`` at the top)."""
    import yaml

    from lakeline.local.project import ProjectConfig

    if config is None:
        return None
    try:
        data = yaml.safe_load(config.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"cannot read {config}: {error}") from error
    if isinstance(data, dict) and data.keys() & {"pipeline", "raw_root", "stage_root"}:
        return None
    return ProjectConfig.load(config)


def _settings(
    config: Path | None, project: ProjectConfig | None, defaults: dict[str, Any], table_overrides: dict[str, Any]
) -> PipelineSettings:
    """``defaults`` overlaid with the ``--config`` file: its ``project`` (``_project``), or else its
    pipeline settings; then the table options given on the command line."""
    if project is not None:
        base: dict[str, Any] = {
            "environment": project.environment,
            "default_table": project.default_table.model_dump(),
            "tables": {name: table.model_dump() for name, table in project.tables_settings.items()},
        }
    else:
        base = PipelineSettings.from_yaml(config).model_dump() if config else {}
    merged = {**defaults, **{k: v for k, v in base.items() if v not in (None, "", {})}}
    if defaults.get("environment"):  # --environment, given on the command line, wins over the file
        merged["environment"] = defaults["environment"]
    if table_overrides:
        merged["default_table"] = {**merged.get("default_table", {}), **table_overrides}
    try:
        return PipelineSettings.model_validate(merged)
    except ValueError as error:
        raise LakelineError(f"invalid settings: {error}") from error


def _workspace(project: ProjectConfig | None, workspace: Path | None) -> Workspace:
    """``--workspace``, else the ``--config`` project's workspace (and raw folder), else ``.lakeline``."""
    from lakeline.local.workspace import Workspace

    if workspace is None and project is not None:
        return Workspace.at(project.workspace, project.raw)
    return Workspace.at(workspace or Path(".lakeline"))


BucketCount = Annotated[int | None, typer.Option(help="files per partition (default from config, else 1)")]
TableFormatOption = Annotated[str | None, typer.Option("--format", help="PARQUET, ORC, JSON or TEXTFILE")]
CompressionOption = Annotated[str | None, typer.Option(help="e.g. SNAPPY, GZIP, ZSTD, NONE")]
EnvironmentOption = Annotated[str | None, typer.Option(help="database name suffix, e.g. dev")]
ConfigOption = Annotated[
    Path | None, typer.Option(help="the project's lakeline.yml (or a file of pipeline settings)", show_default=False)
]
WorkspaceOption = Annotated[
    Path | None,
    typer.Option(help="local workspace folder [default: the --config project's, else .lakeline]", show_default=False),
]


@stage_a_app.command("plan")
def stage_a_plan(
    key: Annotated[str, typer.Option(help="raw object key: team/dataset/table/[col=value/...]file")],
    raw_bucket: Annotated[str, typer.Option(help="raw bucket name or s3:// location")] = "raw-bucket",
    stage_bucket: Annotated[str, typer.Option(help="stage bucket name or s3:// location")] = "stage-bucket",
    columns: Annotated[str | None, typer.Option(help="the raw table's data columns, comma-separated")] = None,
    catalog: Annotated[Path | None, typer.Option(help="'aws glue get-tables' JSON holding the raw table")] = None,
    run_token: Annotated[str | None, typer.Option(help="fix the run token (default: a new one)")] = None,
    environment: EnvironmentOption = None,
    config: ConfigOption = None,
    bucket_count: BucketCount = None,
    table_format: TableFormatOption = None,
    compression: CompressionOption = None,
) -> None:
    """Print the statements stage A would run for one arrival, as JSON. Nothing is executed."""
    from stage_a.keys import parse_raw_key
    from stage_a.plan import new_run_token, plan_stage_a

    def location(bucket: str) -> str:
        return bucket if "://" in bucket else f"s3://{bucket}/"

    try:
        settings = _settings(
            config,
            _project(config),
            {
                "raw_root": location(raw_bucket),
                "stage_root": location(stage_bucket),
                "environment": environment,
            },
            _table_settings(bucket_count, table_format, compression),
        )
        raw = parse_raw_key(key)
        raw_db = settings.raw_database(raw.team, raw.dataset)
        partition_columns = tuple(Column(column, "string") for column, _ in raw.partition)
        if catalog:
            schema = CatalogFile.load(catalog).describe_table(raw_db, raw.table)
        elif columns:
            names = tuple(Column(name.strip(), "string") for name in columns.split(",") if name.strip())
            schema = TableSchema(raw_db, raw.table, names, partition_columns)
        else:
            fail(
                "stage A needs the raw table's columns to write them and pick a bucket column: "
                "pass --columns a,b,c or --catalog get-tables.json"
            )
        plan = plan_stage_a(raw, settings, schema, run_token=run_token or new_run_token())
    except (LakelineError, TableNotFound) as error:
        fail(str(error))
    data = plan.to_dict()
    print_json(
        {
            "team": plan.team,
            "dataset": plan.dataset,
            "table": plan.table,
            "source_database": plan.source_database,
            "target_database": plan.target_database,
            "partition": plan.partition,
            "statements": plan.statements,
            "plan": {k: v for k, v in data.items() if k != "statements"},
        }
    )


@stage_a_app.command("run")
def stage_a_run(
    key: Annotated[str, typer.Option(help="raw object key, relative to the workspace's raw folder")],
    workspace: WorkspaceOption = None,
    environment: EnvironmentOption = None,
    config: ConfigOption = None,
    bucket_count: BucketCount = None,
    table_format: TableFormatOption = None,
    compression: CompressionOption = None,
) -> None:
    """Run stage A for one arrival on embedded Spark, against files under WORKSPACE/raw."""
    from lakeline.local.relocation import open_engine
    from lakeline.local.stage_a import partition_row_count, run_local_arrival
    from stage_a.keys import parse_raw_key

    try:
        parse_raw_key(key)  # reject a bad key before starting Spark
        project = _project(config)
        ws = _workspace(project, workspace)
        overrides = _table_settings(bucket_count, table_format, compression)
        settings = _settings(config, project, ws.settings(environment=environment).model_dump(), overrides)
        with err_console.status("starting embedded Spark"):
            engine = open_engine(ws, _moved)
        with err_console.status(f"stage A: {key}"):
            result = run_local_arrival(engine, ws, key, settings)
        rows = partition_row_count(engine, result.plan.target_database, result.plan.table, result.plan.partition)
    except (LakelineError, QueryError) as error:
        fail(str(error), code=1 if isinstance(error, QueryError) else 2)
    print_json(
        {
            "table": f"{result.plan.target_database}.{result.plan.table}",
            "partition": result.plan.partition,
            "location": result.plan.target_location,
            "rows": rows,
            "files": result.data_files,
            "superseded_deleted": result.superseded_deleted,
            "statements": result.plan.statements,
        }
    )


@app.command("demo")
def demo(
    workspace: Annotated[Path, typer.Option(help="where the sample lake and the results go")] = Path(".lakeline-demo"),
) -> None:
    """Run the pipeline locally on generated sample data (embedded PySpark, no AWS account)."""
    from lakeline.local.demo import run_demo

    try:
        run_demo(workspace, progress_console())
    except LakelineError as error:
        fail(str(error))


def main() -> None:  # pragma: no cover - console script entry
    app()


stage_b_app = typer.Typer(help="Stage B: templated SQL steps from dependency items, chained.")
app.add_typer(stage_b_app, name="stage-b")


def _partition_options(values: list[str]) -> dict[str, str]:
    partition: dict[str, str] = {}
    for value in values:
        column, equals, text = value.partition("=")
        if not equals or not column or not text:
            raise LakelineError(f"--partition {value!r} must be COLUMN=VALUE")
        partition[column] = text
    return partition


@stage_b_app.command("run")
def stage_b_run(
    dataset: Annotated[str, typer.Option(help="target dataset, database.table")],
    partition: Annotated[list[str], typer.Option(help="destination partition COLUMN=VALUE (repeatable)")],
    deps: Annotated[
        list[Path] | None,
        typer.Option(help="dependency item JSON files or folders (repeatable) [default: the --config project's]"),
    ] = None,
    workspace: WorkspaceOption = None,
    usage: Annotated[str, typer.Option(help="append or overwrite")] = "overwrite",
    queries: Annotated[
        Path | None,
        typer.Option(help="folder of <team>/*.sql files [default: the --config project's, else athena_queries]"),
    ] = None,
    chain: Annotated[bool, typer.Option(help="run the targets this one triggers, and theirs")] = True,
    environment: EnvironmentOption = None,
    config: ConfigOption = None,
) -> None:
    """Build one target partition on embedded Spark from its dependency item, then what it triggers."""
    from lakeline.dependencies.files import load_items
    from lakeline.local.dependencies import LocalDependencies
    from lakeline.local.pipeline import LocalPipeline
    from lakeline.local.relocation import open_engine
    from lakeline.storage import LocalObjectStore
    from stage_b.ledger import FileAppliedMessages
    from stage_b.messages import SourceArrival, StageBMessage
    from stage_b.process import StageBServices

    try:
        if usage not in ("append", "overwrite"):
            raise LakelineError(f"--usage must be append or overwrite, not {usage!r}")
        project = _project(config)
        item_paths = deps or (project.dependencies if project else [])
        if not item_paths:
            raise LakelineError("give --deps (dependency item files or folders) or a --config project that lists them")
        dependencies = LocalDependencies(load_items(item_paths))
        target = _partition_options(partition)
        message = StageBMessage.model_validate(
            {
                "target_dataset": dataset,
                "partition": target,
                "trigger": SourceArrival(table=dataset, partition=target, run="manual"),
                "usage": usage,
            }
        )
        ws = _workspace(project, workspace)
        settings = _settings(config, project, ws.settings(environment=environment).model_dump(), {})
        with err_console.status("starting embedded Spark"):
            engine = open_engine(ws, _moved)
        services = StageBServices(
            engine=engine,
            store=LocalObjectStore(),
            settings=settings,
            dependencies=dependencies,
            ledger=FileAppliedMessages(ws.root / "state" / "applied.json"),
            queries_root=queries or (project.queries if project else Path("athena_queries")),
        )
        pipeline = LocalPipeline(engine, ws, services, lambda stage, what: err_console.print(f"{stage}: {what}"))
        if chain:
            run = pipeline.drain([message])
        else:
            from lakeline.local.pipeline import PipelineRun
            from stage_b.process import process_stage_b

            run = PipelineRun(stage_b=[process_stage_b(message, services)])
    except (LakelineError, QueryError) as error:
        fail(str(error), code=1 if isinstance(error, QueryError) else 2)
    print_json(
        {
            "runs": [
                {
                    "dataset": outcome.message.target_dataset,
                    "partition": outcome.message.partition,
                    "skipped": outcome.skipped,
                    "files": outcome.result.data_files if outcome.result else [],
                    "statements": outcome.plan.statements if outcome.plan else [],
                }
                for outcome in run.stage_b
            ],
            "failed": [{"node": failed.message.node, "error": failed.error} for failed in run.failed],
            "unrouted": [unrouted.describe() for unrouted in run.unrouted],
        }
    )
    if run.failed or run.unrouted:
        raise typer.Exit(1)


class ResultFormat(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


def print_result(result: QueryResult, output: ResultFormat, console: Console) -> None:
    """A query's rows as a table (as wide as its values, also in a pipe), CSV with a header, or JSON
    (an array of objects)."""
    import csv

    from rich.table import Table

    from lakeline.console import print_whole

    if output is ResultFormat.csv:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows(["" if value is None else value for value in row] for row in result.rows)
    elif output is ResultFormat.json:
        objects = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
        sys.stdout.write(json.dumps(objects, indent=1, default=str) + "\n")
    else:
        table = Table(*result.columns)
        for row in result.rows:
            table.add_row(*("NULL" if value is None else str(value) for value in row))
        print_whole(console, table)


@app.command("sql")
def run_sql(
    file: Annotated[Path | None, typer.Argument(help="file of Athena-dialect statements separated by ';'")] = None,
    query: Annotated[str | None, typer.Option("--query", "-q", help="one statement instead of a file")] = None,
    workspace: WorkspaceOption = None,
    config: ConfigOption = None,
    output: Annotated[ResultFormat, typer.Option("--format", help="how results are printed")] = ResultFormat.table,
    server: Annotated[
        bool,
        typer.Option(
            envvar="LAKELINE_SQL_SERVER",
            help="keep the workspace's Spark running in a server between calls (--no-server: start and stop it "
            "in this command)",
        ),
    ] = True,
    keep: Annotated[
        float, typer.Option(help="minutes the server stays without a query", min=0.1)
    ] = DEFAULT_KEEP_MINUTES,
    stop: Annotated[bool, typer.Option("--stop", help="stop the workspace's SQL server and exit")] = False,
) -> None:
    """Run Athena-dialect SQL on the workspace's embedded Spark (create tables, look at results).
    The first call starts a server that keeps Spark running for the next ones (--keep minutes without
    a query); any other command on the workspace stops it first."""
    import sqlglot

    from lakeline.local import sql_server

    try:
        ws = _workspace(_project(config), workspace)
    except LakelineError as error:
        fail(str(error))
    if stop:
        stopped = sql_server.stop(ws)
        err_console.print("SQL server stopped" if stopped else "no SQL server runs on this workspace")
        return
    if (file is None) == (query is None):
        fail("give a FILE or --query, not both")
    text = query if query is not None else file.read_text() if file else ""
    try:
        statements = [s.sql("athena") for s in sqlglot.parse(text, read="athena") if s is not None]
    except sqlglot.errors.ParseError as error:
        fail(f"cannot parse the SQL: {error}")
    try:
        engine = _sql_engine(ws, server, keep)
    except LakelineError as error:
        fail(str(error))
    console = Console()
    for statement in statements:
        try:
            result = engine.execute(statement)
        except (LakelineError, QueryError) as error:
            fail(str(error), code=1)
        if result.columns:
            print_result(result, output, console)


def _sql_engine(ws: Workspace, server: bool, keep: float) -> SparkEngine | SqlClient:
    """The workspace's server (started if none runs, and telling what opening the workspace said), or an
    embedded Spark of this command's own."""
    from lakeline.local import sql_server
    from lakeline.local.relocation import open_engine

    if not server:
        with err_console.status("starting embedded Spark"):
            return open_engine(ws, _moved)
    status = err_console.status(f"starting embedded Spark in a SQL server (kept {keep:g} minutes without a query)")
    try:
        client = sql_server.connect(ws, keep_minutes=keep, waiting=status.start)
    finally:
        status.stop()
    if client.started:
        for note in client.record.notes:
            _moved(note)
    return client


ProjectOption = Annotated[Path, typer.Option("--config", help="lakeline.yml of the local project")]


@app.command("run")
def run_project(
    config: ProjectOption = Path("lakeline.yml"),
    full: Annotated[
        bool, typer.Option("--full", help="send every raw file through the pipeline, even if nothing changed")
    ] = False,
) -> None:
    """Run the pipeline locally over a project's own folders: every file in its raw folder arrives.
    When nothing changed since the last clean run (no new or changed raw file, the same settings, items,
    DDL and queries), it says so without starting Spark."""
    import time

    from lakeline.local.project import LocalProject, ProjectConfig
    from lakeline.local.unresolved import unresolved_file

    console = progress_console()
    try:
        started = time.monotonic()
        project = LocalProject(ProjectConfig.load(config), console)
        keys = project.raw_keys()
        seen = project.snapshot(keys)
        if not full and project.nothing_new(seen):
            root = project.workspace.root
            console.print(
                f"nothing new since the last run: {len(keys)} raw files, all loaded, and the project unchanged "
                f"(checked in {time.monotonic() - started:.1f}s). Results: {root / 'summary.json'}, "
                f"lineage picture: {root / 'lineage.html'}. --full sends every file through the pipeline again.",
                soft_wrap=True,
            )
            return
        with project:
            project.prepare()
            project.process(keys, seen.files)  # the snapshot read every file already
            run = project.finish(started)
            earlier = project.conclude(seen, run.report)
    except (LakelineError, QueryError) as error:
        fail(str(error), code=1 if isinstance(error, QueryError) else 2)
    for failure in earlier:
        console.print(f"[red]still failed (an earlier run)[/] {escape(failure)}", soft_wrap=True)
    if earlier:
        console.print(
            "re-send the files of a failed target, or rebuild it with `lakeline stage-b run`; "
            f"{unresolved_file(project.workspace.root)} lists what is open (delete it to dismiss)",
            soft_wrap=True,
        )
    if run.report.failures or run.report.quarantined or earlier:
        raise typer.Exit(1)


@app.command("status")
def status(
    config: ConfigOption = None,
    workspace: WorkspaceOption = None,
    stack: Annotated[
        str | None, typer.Option(help="a deployed pipeline stack (e.g. Lakeline-dev-Pipeline) instead of a workspace")
    ] = None,
    since_hours: Annotated[float, typer.Option(help="deployed: failed executions of the last N hours")] = 24.0,
    output: Annotated[str, typer.Option("--format", help="table or json")] = "table",
) -> None:
    """What the pipeline holds (partitions and their versions), what waits (arrivals behind a run,
    triggerMode all targets and the sources they lack) and what failed (with the cause, and the
    dead-letter queues or the quarantine). Exits 1 if anything failed or waits in a dead-letter queue."""
    from datetime import UTC, datetime, timedelta

    from botocore.exceptions import BotoCoreError, ClientError

    from lakeline.operations.status import StackClients, deployed_status, local_status

    now = datetime.now(UTC)
    try:
        if output not in ("table", "json"):
            raise LakelineError(f"--format must be table or json, not {output!r}")
        if stack is not None:
            from lakeline.aws.clients import AwsClients

            aws = AwsClients()

            clients = StackClients(
                aws.cloudformation,
                aws.dynamodb,
                aws.sqs,
                aws.stepfunctions,
            )
            report: PipelineStatus = deployed_status(clients, stack, now, since=timedelta(hours=since_hours))
        else:
            report = local_status(*_status_workspace(config, workspace), now)
    except (LakelineError, OSError, ValueError) as error:
        fail(str(error))
    except (ClientError, BotoCoreError) as error:  # a stack that does not exist, no credentials, no region
        fail(f"cannot read stack {stack}: {error}")
    if output == "json":
        typer.echo(json.dumps(report.to_dict(), indent=1))
    else:
        _print_status(report)
    if report.failures or any(report.dead_letters.values()):
        raise typer.Exit(1)


@app.command("reprocess")
def reprocess_command(
    table: Annotated[str, typer.Option(help="the table whose partitions feed what is rebuilt, database.table")],
    first: Annotated[str, typer.Option("--from", help="first partition value (inclusive), e.g. 2024-03-01")],
    last: Annotated[str, typer.Option("--to", help="last partition value (inclusive)")],
    targets: Annotated[
        list[str] | None, typer.Option("--target", help="rebuild only this target, database.table (repeatable)")
    ] = None,
    config: ConfigOption = None,
    stack: Annotated[str | None, typer.Option(help="a deployed pipeline stack: send to its queue B")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="list what would be rebuilt; send nothing")] = False,
    raw: Annotated[
        bool,
        typer.Option(
            "--raw",
            help="send the raw files loaded into the stage table's partitions through stage A again (rebuilt "
            "with its settings as they are now; what they feed follows)",
        ),
    ] = False,
) -> None:
    """Rebuild what a range of a table's partitions feeds (backfills, a fixed target, a changed query):
    each partition is routed again as when it was finished, and its targets and their chains run again
    (an append target's run replaces the rows that partition appended before). With --raw, a stage
    table's partitions are rebuilt from their raw files first. Locally (--config) it runs them; deployed
    (--stack) it sends them to queue B (--raw: re-sends the raw objects)."""
    import time

    from botocore.exceptions import BotoCoreError, ClientError

    from lakeline.dependencies.arrivals import ArrivalTracker
    from lakeline.dependencies.model import normalise_table_name
    from lakeline.operations.reprocess import (
        raw_to_resend,
        reprocess,
        reprocess_run,
        scan_commit_items,
        scan_table_partitions,
    )

    console = progress_console()
    started = time.monotonic()
    try:
        table = normalise_table_name(table, "--table")
        wanted = {normalise_table_name(target, "--target") for target in targets or []}
        if raw and wanted:
            raise LakelineError("--raw rebuilds the stage partitions and everything they feed: give no --target")
        if stack is not None:
            done = _reprocess_stack(stack, table, first, last, wanted, dry_run, raw)
            failed = False
        else:
            from lakeline.local.project import LocalProject, ProjectConfig

            with LocalProject(ProjectConfig.load(config or Path("lakeline.yml")), console) as project:
                project.prepare()
                flow, cloud = project.started_flow, project.started_cloud
                state = cloud.names.pipeline_state
                if raw:
                    done = raw_to_resend(table, scan_commit_items(cloud.dynamodb, state, table), first, last)
                    there = [key for key in done.raw_files if (project.workspace.raw_dir / key).is_file()]
                    done.skipped += [
                        f"{key}: gone from the raw folder since it was loaded"
                        for key in done.raw_files
                        if key not in there
                    ]
                    done.raw_files = there
                    if not dry_run:
                        report = project.resend(there, reprocess_run())
                else:
                    done = reprocess(
                        table,
                        scan_table_partitions(cloud.dynamodb, state, table, first, last),
                        flow.store,
                        ArrivalTracker(cloud.dynamodb, state),
                        cloud.sqs,
                        cloud.queue_urls["queue-b"],
                        targets=wanted,
                        dry_run=dry_run,
                    )
                    if not dry_run:
                        report = project.process([])
                if not dry_run:
                    project.finish(started)
                    project.carry_failures(report)
                    failed = bool(report.failures)
                else:
                    failed = False
    except (LakelineError, QueryError) as error:
        fail(str(error))
    except (ClientError, BotoCoreError) as error:
        fail(f"cannot read stack {stack}: {error}")
    if raw:
        verb = "would send" if dry_run else "sent"
        console.print(
            f"{table}: {len(done.partitions)} partitions; {verb} {len(done.raw_files)} raw files through stage A again"
        )
        for key in done.raw_files:
            console.print(f"  {escape(key)}", soft_wrap=True)
        for line in done.skipped:
            console.print(f"[yellow]left out[/] {escape(line)}", soft_wrap=True)
        if failed or done.skipped:
            raise typer.Exit(1)
        return
    verb = "would rebuild" if dry_run else ("sent" if stack else "rebuilt")
    console.print(f"{table}: {len(done.partitions)} partitions routed again; {verb} {len(done.messages)} targets")
    for message in done.messages:
        console.print(f"  {escape(message.node)}", soft_wrap=True)
    for line in [*done.skipped, *done.unrouted]:
        console.print(f"[yellow]left out[/] {escape(line)}", soft_wrap=True)
    if failed or done.unrouted or done.skipped:
        raise typer.Exit(1)


def _reprocess_stack(
    stack: str, table: str, first: str, last: str, wanted: set[str], dry_run: bool, raw: bool
) -> Reprocessing:
    from lakeline.aws.clients import AwsClients
    from lakeline.dependencies.arrivals import ArrivalTracker
    from lakeline.dependencies.store import DependencyStore
    from lakeline.operations.reprocess import (
        raw_to_resend,
        reprocess,
        reprocess_run,
        resend_raw_files,
        scan_commit_items,
        scan_table_partitions,
    )
    from lakeline.operations.status import stack_outputs

    aws = AwsClients()
    outputs = stack_outputs(aws.cloudformation, stack)
    dynamodb, state, s3 = aws.dynamodb, outputs["pipeline_state"], aws.s3
    store = DependencyStore(dynamodb, outputs["dependencies"], outputs["dependencies_by_table"])
    if raw:
        done = raw_to_resend(table, scan_commit_items(dynamodb, state, table), first, last)
        if "raw_bucket" not in outputs:
            raise LakelineError(f"stack {stack} has no output RawBucket: deploy this version of Lakeline for --raw")
        if not dry_run:
            sent = resend_raw_files(s3, outputs["raw_bucket"], done.raw_files, reprocess_run(), done.skipped)
            done.raw_files = sent
        return done
    return reprocess(
        table,
        scan_table_partitions(dynamodb, state, table, first, last),
        store,
        ArrivalTracker(dynamodb, state),
        aws.sqs,
        outputs["stage_b_queue"],
        targets=wanted,
        dry_run=dry_run,
    )


dlq_app = typer.Typer(help="What waits in the dead-letter queues, and why; send it back once fixed.")
app.add_typer(dlq_app, name="dlq")
DLQ_QUEUES = {  # --queue: (its DLQ's stack output, the queue a redrive sends to)
    "stage-a": ("stage_a_dlq", "stage_a_queue"),
    "stage-b": ("stage_b_dlq", "stage_b_queue"),
    "lineage": ("lineage_dlq", None),
    "dependencies-stream": ("dependencies_stream_dlq", None),
}
StackOption = Annotated[str | None, typer.Option(help="a deployed pipeline stack, e.g. Lakeline-dev-Pipeline")]


@dlq_app.command("list")
def dlq_list(
    stack: StackOption = None,
    queue: Annotated[list[str] | None, typer.Option(help=f"one of {', '.join(DLQ_QUEUES)} [default: all]")] = None,
    config: ConfigOption = None,
    workspace: WorkspaceOption = None,
) -> None:
    """Each parked message with the reason it was parked (deployed), or each quarantined file with its
    reason (a workspace). Nothing is taken off a queue. Exits 1 if anything is parked."""
    from botocore.exceptions import BotoCoreError, ClientError

    console = Console(soft_wrap=True)
    try:
        if stack is None:
            from lakeline.local.quarantine import Quarantine

            root, _ = _status_workspace(config, workspace)
            quarantined = Quarantine.of(root).parked()
            for key, reason in quarantined:
                console.print(f"quarantine  {escape(key)}  {escape(reason)}")
            console.print(f"{len(quarantined)} quarantined; fix a file and run again to load it")
            parked = len(quarantined)
        else:
            parked = _list_stack_dead_letters(console, stack, _dead_letter_queues(queue))
    except (LakelineError, OSError, ValueError) as error:
        fail(str(error))
    except (ClientError, BotoCoreError) as error:
        fail(f"cannot read stack {stack}: {error}")
    if parked:
        raise typer.Exit(1)


def _dead_letter_queues(named: list[str] | None) -> list[str]:
    """The ``--queue`` names given (every dead-letter queue if none), each checked."""
    unknown = [name for name in named or [] if name not in DLQ_QUEUES]
    if unknown:
        raise LakelineError(f"--queue {', '.join(unknown)}: not one of {', '.join(DLQ_QUEUES)}")
    return named or list(DLQ_QUEUES)


def _list_stack_dead_letters(console: Console, stack: str, queues: list[str]) -> int:
    from lakeline.aws.clients import AwsClients
    from lakeline.operations.dead_letters import read_dead_letters
    from lakeline.operations.status import stack_outputs

    aws = AwsClients()

    outputs, sqs, parked = stack_outputs(aws.cloudformation, stack), aws.sqs, 0
    for name in queues:
        letters = read_dead_letters(sqs, outputs[DLQ_QUEUES[name][0]])
        parked += len(letters)
        console.print(f"[bold]{name}[/]: {len(letters)} parked")
        for letter in letters:
            console.print(f"  {letter.message_id}  {escape(letter.reason)}")
            console.print(f"    {escape(letter.body[:200])}", style="dim")
    return parked


@dlq_app.command("show")
def dlq_show(
    message: Annotated[str, typer.Argument(help="a message id (as `dlq list` prints it), or a quarantined file's key")],
    stack: StackOption = None,
    queue: Annotated[list[str] | None, typer.Option(help=f"one of {', '.join(DLQ_QUEUES)} [default: all]")] = None,
    config: ConfigOption = None,
    workspace: WorkspaceOption = None,
) -> None:
    """One parked message whole: its queue, reason, the function that parked it and its body (JSON
    indented); or a quarantined file's reason and where the file is. Nothing is taken off a queue."""
    from botocore.exceptions import BotoCoreError, ClientError

    from lakeline.aws.clients import AwsClients
    from lakeline.operations.dead_letters import read_dead_letters
    from lakeline.operations.status import stack_outputs

    aws = AwsClients()

    console = Console(soft_wrap=True)
    try:
        if stack is None:
            from lakeline.local.quarantine import Quarantine

            root, _ = _status_workspace(config, workspace)
            parked = Quarantine.of(root).parked_record(message)
            if parked is None:
                raise LakelineError(f"no quarantined file {message!r} in {root} (`lakeline dlq list` names them)")
            console.print(f"quarantined {escape(message)} at {parked.get('at', '?')}")
            console.print(f"reason: {escape(parked.get('reason', ''))}")
            return
        queues = _dead_letter_queues(queue)
        outputs, sqs = stack_outputs(aws.cloudformation, stack), aws.sqs
        for name in queues:
            for letter in read_dead_letters(sqs, outputs[DLQ_QUEUES[name][0]]):
                if letter.message_id == message:
                    console.print(f"[bold]{name}[/] {letter.message_id}")
                    console.print(f"reason: {escape(letter.reason)}")
                    console.print(f"parked by: {escape(letter.source or '(not recorded)')}")
                    if letter.json_body:
                        print_json(json.loads(letter.body))
                    else:
                        console.print(escape(letter.body))
                    return
        raise LakelineError(f"no parked message {message} in {', '.join(queues)}")
    except (LakelineError, OSError) as error:
        fail(str(error))
    except (ClientError, BotoCoreError) as error:
        fail(f"cannot read stack {stack}: {error}")


@dlq_app.command("redrive")
def dlq_redrive(
    queue: Annotated[str, typer.Option(help="stage-a or stage-b")],
    stack: Annotated[str, typer.Option(help="a deployed pipeline stack, e.g. Lakeline-dev-Pipeline")],
) -> None:
    """Send a stage's parked messages back to its queue, once their cause is fixed (a file re-uploaded
    fixed is a new arrival already; this is for a fixed table, grant or item). Targets parked because
    they could not be routed stay: fix the item and use `lakeline reprocess`."""
    from botocore.exceptions import BotoCoreError, ClientError

    from lakeline.aws.clients import AwsClients
    from lakeline.operations.dead_letters import redrive
    from lakeline.operations.status import stack_outputs

    aws = AwsClients()

    try:
        dead_letters, target = DLQ_QUEUES.get(queue, ("", None))
        if target is None:
            raise LakelineError(f"--queue must be stage-a or stage-b, not {queue!r}")
        outputs = stack_outputs(aws.cloudformation, stack)
        sent, kept = redrive(aws.sqs, outputs[dead_letters], outputs[target])
    except LakelineError as error:
        fail(str(error))
    except (ClientError, BotoCoreError) as error:
        fail(f"cannot read stack {stack}: {error}")
    console = Console(soft_wrap=True)
    console.print(f"{queue}: {sent} messages sent back to the queue")
    for letter in kept:
        console.print(f"[yellow]kept[/] {letter.message_id}: {escape(letter.reason)} (fix the item, then reprocess)")


def _status_workspace(config: Path | None, workspace: Path | None) -> tuple[Path, Callable[[str], frozenset[str]]]:
    """The workspace folder (which must exist: status creates nothing) and each target's sources, from
    the project's dependency items if ``--config`` names them."""
    from lakeline.dependencies.files import load_items

    project = _project(config)
    root = (workspace or (project.workspace if project else Path(".lakeline"))).resolve()
    if not (root / "state").is_dir() and not (root / "summary.json").exists():
        raise LakelineError(f"no Lakeline workspace at {root}: run `lakeline run` first, or name it with --workspace")
    sources = (
        {item.dataset: frozenset(item.source_tables) for item in load_items(project.dependencies)} if project else {}
    )
    return root, lambda target: sources.get(target, frozenset())


def _print_status(report: PipelineStatus) -> None:
    from rich.table import Table

    from lakeline.console import print_whole

    console = Console(soft_wrap=True)
    last = f" — last run {escape(report.last_run)}" if report.last_run else ""
    console.print(f"[bold]{escape(report.where)}[/]{last}")
    if report.sql_server:
        console.print(f"SQL server: {escape(report.sql_server)}")
    partitions = Table(title="partitions")
    for column in ("table", "partition", "version", "files", "published (UTC)", "waiting", "run in flight"):
        justify = "right" if column in ("version", "files", "waiting") else "left"
        partitions.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for part in report.partitions:
        partitions.add_row(
            part.table,
            part.partition or "(unpartitioned)",
            str(part.version),
            str(part.files),
            part.published_at or "-",
            str(part.waiting),
            part.run_in_flight or "",
        )
    print_whole(console, partitions)  # a pipe or a log gets whole rows, not values cut at 80 columns
    for target in report.waiting_targets:
        console.print(
            f"waiting {escape(target.target_partition)}: has {', '.join(target.arrived) or 'nothing'}; "
            f"lacks {', '.join(target.missing) or '(unknown: its item is not in the project)'}"
        )
    shown = ", ".join(f"{name} {count}" for name, count in report.dead_letters.items())
    console.print(f"dead letters: {shown or 'none'}")
    for failure in report.failures:
        console.print(f"[red]{escape(failure)}[/]")
    if not report.failures:
        console.print("nothing failed")


@app.command("watch")
def watch_project(
    config: ProjectOption = Path("lakeline.yml"),
    poll: Annotated[float, typer.Option(help="seconds between looks at the raw folder")] = 2.0,
    duration: Annotated[float | None, typer.Option(help="stop after this many seconds")] = None,
) -> None:
    """Process files as they land in the project's raw folder, until Ctrl-C (or --duration)."""
    import time

    from lakeline.local.project import LocalProject, ProjectConfig, watch

    console = progress_console()
    try:
        started = time.monotonic()
        with LocalProject(ProjectConfig.load(config), console) as project:
            project.prepare()
            try:
                watch(project, poll_seconds=poll, max_seconds=duration)
            except KeyboardInterrupt:
                console.print("stopped")
            project.finish(started)
    except (LakelineError, QueryError) as error:
        fail(str(error), code=1 if isinstance(error, QueryError) else 2)
