"""``lakeline sql``: Athena-dialect SQL on the workspace's embedded Spark (or its SQL server), and how
a query's rows are printed."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from lakeline.cli.shared import ConfigOption, WorkspaceOption, err_console, moved, project_of, workspace_of
from lakeline.console import fail
from lakeline.engines.base import QueryError, QueryResult
from lakeline.errors import LakelineError
from lakeline.local.sql_server import DEFAULT_KEEP_MINUTES

if TYPE_CHECKING:
    from lakeline.engines.spark import SparkEngine
    from lakeline.local.sql_server import SqlClient
    from lakeline.local.workspace import Workspace


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
    deployed: Annotated[
        bool,
        typer.Option(
            "--deployed",
            help="through Athena (pyathena) on the project's local deployment (`lakeline run --deployed`), stood up "
            "with what its last command kept (about half a minute), instead of the embedded runtime's Spark",
        ),
    ] = False,
) -> None:
    """Run Athena-dialect SQL on the workspace's embedded Spark (create tables, look at results).
    The first call starts a server that keeps Spark running for the next ones (--keep minutes without
    a query); any other command on the workspace stops it first."""
    import sqlglot

    from lakeline.local import sql_server

    try:
        ws = workspace_of(project_of(config), workspace)
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
    if deployed:
        _run_deployed_sql(config or Path("lakeline.yml"), statements, output)
        return
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
            return open_engine(ws, moved)
    status = err_console.status(f"starting embedded Spark in a SQL server (kept {keep:g} minutes without a query)")
    try:
        client = sql_server.connect(ws, keep_minutes=keep, waiting=status.start)
    finally:
        status.stop()
    if client.started:
        for note in client.record.notes:
            moved(note)
    return client


def _run_deployed_sql(config: Path, statements: list[str], output: ResultFormat) -> None:
    """``sql --deployed``: each statement through the deployment's Athena workgroup, as users query it in AWS;
    what a statement changes (a table made, rows written) is kept for the next command."""
    from lakeline.local.project import ProjectConfig
    from lakeline.operations.deployed_run import DeployedProject, operation_errors

    console = Console()
    try:
        project = DeployedProject(ProjectConfig.load(config), err_console, keep_results=True)
    except LakelineError as error:
        fail(str(error))
    if not project.kept():
        fail(f"no local deployment is kept in {project.state_folder}: run `lakeline run --deployed` first")
    try:
        with project:
            try:
                for statement in statements:
                    result = project.operator.athena_result(statement)
                    if result.columns:
                        print_result(result, output, console)
            finally:
                # What a statement set going (rows written into a raw table arrive) ends before the state is kept.
                project.system.executions.wait(timeout=3600)
                project.keep()
    except operation_errors() as error:
        fail(str(error), code=1)
