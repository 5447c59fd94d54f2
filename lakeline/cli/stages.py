"""``lakeline stage-a plan | run`` and ``lakeline stage-b run``: one stage at a time, for one arrival
or one target partition."""

from __future__ import annotations

import sys
from contextlib import redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

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
    print_json,
    project_of,
    settings_of,
    table_settings,
    workspace_of,
)
from lakeline.console import fail
from lakeline.engines.base import Column, QueryError, TableNotFound, TableSchema
from lakeline.errors import LakelineError, validated

if TYPE_CHECKING:
    from lakeline.project.config import ProjectConfig
    from lakeline.project.workspace import Workspace

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


@stage_a_app.command("run", short_help="Run stage A for one arrival on embedded Spark, as the pipeline does.")
def stage_a_run_command(
    key: Annotated[str, typer.Option(help="raw object key, relative to the workspace's raw folder")],
    workspace: WorkspaceOption = None,
    environment: EnvironmentOption = None,
    config: ConfigOption = None,
    bucket_count: BucketCount = None,
    table_format: TableFormatOption = None,
    compression: CompressionOption = None,
) -> None:
    """Run stage A for one arrival on embedded Spark, against files under WORKSPACE/raw, as the pipeline
    runs it (lease, commit, catalog swap): a file it has loaded before changes nothing."""
    from lakeline.runtimes.embedded.project import LocalProject
    from lakeline.runtimes.embedded.single_stage import run_arrival
    from stage_a.keys import parse_raw_key

    try:
        parse_raw_key(key)  # reject a bad key before starting Spark
        project = project_of(config)
        ws = workspace_of(project, workspace)
        overrides = table_settings(bucket_count, table_format, compression)
        settings = settings_of(config, project, ws.settings(environment=environment).model_dump(), overrides)
        local = LocalProject(_single_stage_project(project, ws, None), err_console, settings=settings)
        # The functions' metrics lines go to stderr: stdout is the command's JSON.
        with local, redirect_stdout(sys.stderr):
            result = run_arrival(local.started_flow, key)
            local.started_flow.write_openlineage()
            local.carry_failures(local.started_flow.report)
    except (LakelineError, QueryError) as error:
        fail(str(error), code=1 if isinstance(error, QueryError) else 2)
    if result.failures:  # as the failure function left it (docs/stage-a.md says what each failed step leaves)
        fail("; ".join(result.failures), code=1)
    print_json(result.to_dict())


def _single_stage_project(project: ProjectConfig | None, ws: Workspace, queries: Path | None) -> ProjectConfig:
    """The project a single-stage command runs the embedded runtime with: ``--config``'s, if given, in the
    command's workspace; its dependency items are registered by the command itself (``stage-b run``)."""
    from lakeline.project.config import ProjectConfig

    update: dict[str, object] = {"workspace": ws.root, "raw": ws.raw_dir, "dependencies": [], "tables": []}
    return (project or ProjectConfig()).model_copy(update=update if queries is None else {**update, "queries": queries})


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
    from lakeline.partitions import new_run_token
    from lakeline.runtimes.embedded.project import LocalProject
    from lakeline.runtimes.embedded.single_stage import run_target
    from stage_b.messages import StageBMessage

    try:
        if usage not in ("append", "overwrite"):
            raise LakelineError(f"--usage must be append or overwrite, not {usage!r}")
        project = project_of(config)
        item_paths = deps or (project.dependencies if project else [])
        if not item_paths:
            raise LakelineError("give --deps (dependency item files or folders) or a --config project that lists them")
        items = load_items(item_paths)
        target = _partition_options(partition)
        # The message's id is its trigger's: an append given again is applied once (the commit's applied
        # ids); an overwrite is rebuilt each time it is asked for (idempotent by construction).
        trigger_run = "manual" if usage == "append" else f"manual-{new_run_token()}"
        message = validated(
            StageBMessage,
            {
                "target_dataset": dataset,
                "partition": target,
                "trigger": {"table": dataset, "partition": target, "run": trigger_run},
                "usage": usage,
            },
            "stage B message",
        )
        builds = [item for item in items if item.dataset == dataset]
        if not builds:
            raise LakelineError(f"no dependency item builds {dataset} in {', '.join(map(str, item_paths))}")
        if list(target) != [builds[0].partition_column]:
            raise LakelineError(
                f"{dataset} is partitioned by {builds[0].partition_column}: give --partition "
                f"{builds[0].partition_column}=<value>, not {', '.join(target) or 'none'}"
            )
        ws = workspace_of(project, workspace)
        settings = settings_of(config, project, ws.settings(environment=environment).model_dump(), {})
        queries_root = queries or (project.queries if project else Path("athena_queries"))
        local = LocalProject(_single_stage_project(project, ws, queries_root), err_console, settings=settings)
        with local, redirect_stdout(sys.stderr):
            flow = local.started_flow
            # Without the chain only the target's own item is known: its post-update routes nothing onwards.
            registered = items if chain else [item for item in items if item.dataset == dataset]
            if registered:
                flow.register(registered)
            runs = run_target(flow, message, chain=chain)
            flow.write_openlineage()
            refused = [failure for failure in runs.refused if failure.startswith(f"{message.node}: ")]
            if refused:  # the command's own message: nothing ran, nothing for a later run to resolve
                raise LakelineError("; ".join(refused))
            local.carry_failures(flow.report)
    except (LakelineError, QueryError) as error:
        fail(str(error), code=1 if isinstance(error, QueryError) else 2)
    output = runs.to_dict()
    print_json(output)
    if output["failed"] or output["unrouted"]:
        raise typer.Exit(1)
