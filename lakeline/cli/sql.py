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

from lakeline.cli.shared import (
    ConfigOption,
    WorkspaceOption,
    err_console,
    moved,
    project_file,
    project_of,
    reads_deployment,
    workspace_of,
)
from lakeline.console import fail
from lakeline.engines.base import QueryError, QueryResult
from lakeline.errors import LakelineError, plain
from lakeline.project.sql_server import DEFAULT_KEEP_MINUTES

if TYPE_CHECKING:
    from lakeline.engines.spark import SparkEngine
    from lakeline.project.sql_server import SqlClient
    from lakeline.project.workspace import Workspace
    from lakeline.runtimes.deployed.endpoint import RunningEndpoint


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
    query: Annotated[
        list[str] | None,
        typer.Option("--query", "-q", help="a statement instead of a file; repeat it to run several in order"),
    ] = None,
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
        bool | None,
        typer.Option(
            "--deployed/--embedded",
            help="--deployed: through Athena (pyathena) on the project's local deployment (what `lakeline run` "
            "stands up): the one a `lakeline up` keeps running on the workspace, else one stood up with what its "
            "last command kept (about half a minute); --embedded: the embedded runtime's Spark [default: the one "
            "the workspace's last run used]",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run Athena-dialect SQL on what the project's last run left (create tables, look at results): through
    the local deployment's Athena, or on the embedded runtime's Spark, where the first call starts a server
    that keeps Spark running for the next ones (--keep minutes without a query; any other command on the
    workspace stops it first)."""
    import sqlglot

    from lakeline.project import sql_server

    try:
        ws = workspace_of(project_of(config), workspace)
    except LakelineError as error:
        fail(str(error))
    if stop:
        stopped = sql_server.stop(ws)
        err_console.print("SQL server stopped" if stopped else "no SQL server runs on this workspace")
        return
    if (file is None) == (not query):
        fail("give a FILE or --query, not both")
    texts = list(query) if query else [file.read_text()] if file else []
    try:
        # Each --query on its own: one that holds a ';' of its own is its statements, in order.
        statements = [s.sql("athena") for text in texts for s in sqlglot.parse(text, read="athena") if s is not None]
    except sqlglot.errors.ParseError as error:
        fail(plain(f"cannot parse the SQL: {error}"))
    try:
        project = project_file(config, workspace) if reads_deployment(deployed, ws.root) else None
        theirs = workspace_of(project_of(project), None).root if project is not None and workspace else None
    except LakelineError as error:
        fail(str(error))
    if project is not None and theirs is not None and theirs != ws.root:
        fail(f"--workspace {ws.root} is not the workspace of the project {project} ({theirs}): name the project")
    if project is not None:
        from lakeline.runtimes.deployed.endpoint import reachable

        try:
            up = reachable(ws.root)
        except LakelineError as error:
            fail(str(error))
        if up is not None:  # the deployment a `lakeline up` keeps running: through its endpoint, not another
            _run_on_endpoint(up, statements, output)
            return
    if project is not None and not server:
        _run_deployed_sql(project, statements, output)
        return
    try:
        engine = _sql_engine(ws, server, keep, project)
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


def _sql_engine(ws: Workspace, server: bool, keep: float, deployed: Path | None) -> SparkEngine | SqlClient:
    """The workspace's server (started if none runs, and telling what opening the workspace said): on the
    embedded Spark, or on the local deployment of the project ``deployed``; or an embedded Spark of this
    command's own."""
    from lakeline.project import sql_server
    from lakeline.project.relocation import open_engine

    if not server:
        with err_console.status("starting embedded Spark"):
            return open_engine(ws, moved)
    if deployed is not None:
        from lakeline.runtimes.deployed.local_aws import kept_state
        from lakeline.runtimes.deployed.sql_server import serving_arguments

        if not deployed.is_file():
            raise LakelineError(f"no project file {deployed}: name the project's lakeline.yml with --config")
        kept_state.require(ws.root / "deployed" / "state")  # before the embedded server is stopped for nothing
        what = f"standing the local deployment up in a SQL server (kept {keep:g} minutes without a query)"
        mode, command = sql_server.DEPLOYED, serving_arguments(deployed)
    else:
        what = f"starting embedded Spark in a SQL server (kept {keep:g} minutes without a query)"
        mode, command = sql_server.EMBEDDED, []
    status = err_console.status(what)
    try:
        client = sql_server.connect(ws, keep_minutes=keep, waiting=status.start, mode=mode, command=command)
    finally:
        status.stop()
    if client.started:
        for note in client.record.notes:
            moved(note)
    return client


def _run_on_endpoint(up: RunningEndpoint, statements: list[str], output: ResultFormat) -> None:
    """Each statement through the Athena of the deployment ``up`` keeps running, with pyathena as a user's
    client does; what a statement changes is kept when ``up`` stops, as anything else that arrives through it."""
    from lakeline.engines.athena import pyathena_statement

    console = Console()
    connection = up.athena()
    for statement in statements:
        try:
            result = pyathena_statement(connection, statement)
        except QueryError as error:
            fail(f"{error}\n{statement}", code=1)
        if result.columns:
            print_result(result, output, console)


def _run_deployed_sql(config: Path, statements: list[str], output: ResultFormat) -> None:
    """``sql --no-server`` on the deployment: each statement through its Athena workgroup, as users query it in
    AWS; what a statement changes (a table made, rows written) is kept for the next command."""
    from lakeline.project.config import ProjectConfig
    from lakeline.runtimes.deployed.operator import operation_errors
    from lakeline.runtimes.deployed.run import DeployedProject
    from lakeline.runtimes.deployed.sql_server import DeployedStatements

    console = Console()
    try:
        project = DeployedProject(ProjectConfig.load(config), err_console, keep_results=True)
        project.require_kept()
    except LakelineError as error:
        fail(str(error))
    try:
        with project:
            runner = DeployedStatements(project)  # keeps what a statement may change, as the server does
            for statement in statements:
                result = runner.execute(statement)
                if result.columns:
                    print_result(result, output, console)
    except operation_errors() as error:
        fail(str(error), code=1)
