"""``lakeline stage-a plan | run`` and ``lakeline stage-b run``: one stage at a time, for one arrival
or one target partition."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lakeline.catalog_json import CatalogFile
from lakeline.cli.shared import (
    BucketCount,
    CompressionOption,
    ConfigOption,
    EnvironmentOption,
    TableFormatOption,
    WorkspaceOption,
    err_console,
    moved,
    print_json,
    project_of,
    settings_of,
    table_settings,
    workspace_of,
)
from lakeline.console import fail
from lakeline.engines.base import Column, QueryError, TableNotFound, TableSchema
from lakeline.errors import LakelineError, validated

stage_a_app = typer.Typer(help="Stage A: raw arrivals into stage tables (CTAS-simulated inserts).")


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
        settings = settings_of(
            config,
            project_of(config),
            {
                "raw_root": location(raw_bucket),
                "stage_root": location(stage_bucket),
                "environment": environment,
            },
            table_settings(bucket_count, table_format, compression),
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
            "plan": data,
        }
    )


@stage_a_app.command("run")
def stage_a_run_command(
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
        project = project_of(config)
        ws = workspace_of(project, workspace)
        overrides = table_settings(bucket_count, table_format, compression)
        settings = settings_of(config, project, ws.settings(environment=environment).model_dump(), overrides)
        with err_console.status("starting embedded Spark"):
            engine = open_engine(ws, moved)
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


stage_b_app = typer.Typer(help="Stage B: templated SQL steps from dependency items, chained.")


def _partition_options(values: list[str]) -> dict[str, str]:
    partition: dict[str, str] = {}
    for value in values:
        column, equals, text = value.partition("=")
        if not equals or not column or not text:
            raise LakelineError(f"--partition {value!r} must be COLUMN=VALUE")
        partition[column] = text
    return partition


@stage_b_app.command("run", short_help="Build one target partition on embedded Spark, then what it triggers.")
def stage_b_run_command(
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
    from stage_b.messages import StageBMessage
    from stage_b.process import StageBServices

    try:
        if usage not in ("append", "overwrite"):
            raise LakelineError(f"--usage must be append or overwrite, not {usage!r}")
        project = project_of(config)
        item_paths = deps or (project.dependencies if project else [])
        if not item_paths:
            raise LakelineError("give --deps (dependency item files or folders) or a --config project that lists them")
        dependencies = LocalDependencies(load_items(item_paths))
        target = _partition_options(partition)
        message = validated(
            StageBMessage,
            {
                "target_dataset": dataset,
                "partition": target,
                "trigger": {"table": dataset, "partition": target, "run": "manual"},
                "usage": usage,
            },
            "stage B message",
        )
        ws = workspace_of(project, workspace)
        settings = settings_of(config, project, ws.settings(environment=environment).model_dump(), {})
        with err_console.status("starting embedded Spark"):
            engine = open_engine(ws, moved)
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
            from lakeline.local.pipeline import LocalPipelineRun
            from stage_b.process import process_stage_b

            run = LocalPipelineRun(stage_b=[process_stage_b(message, services)])
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
