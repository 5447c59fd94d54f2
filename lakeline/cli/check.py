"""``lakeline check``: a table's quality checks run on demand over what is published (#41)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from lakeline.cli.shared import ConfigOption, RuntimeOption, WorkspaceOption, project_file, reads_deployment
from lakeline.console import fail
from lakeline.engines.base import QueryError
from lakeline.errors import LakelineError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from lakeline.engines.base import QueryResult
    from lakeline.project.workspace import Workspace
    from lakeline.quality.evaluate import QualityReport


def check_command(
    table: Annotated[
        str, typer.Option("--table", help="database.table: a stage table (its table settings' checks) or a target")
    ],
    partition: Annotated[
        list[str] | None,
        typer.Option(help="column=value, once per partition column [default: the whole table as one version]"),
    ] = None,
    config: ConfigOption = None,
    workspace: WorkspaceOption = None,
    deployed: RuntimeOption = None,
) -> None:
    """Run TABLE's checks (its table settings' or its dependency item's) over what readers see now: the
    published partition, or the whole table. On the embedded runtime's Spark (its SQL server), or through the
    local deployment's Athena (the one a `lakeline up` keeps running, else its SQL server). RowCountMatch, which
    compares a new version with the published one, passes here with a note. Exits 1 if a block rule failed
    (warn failures are printed, exit 0), 2 if the table has no checks or an option is wrong."""
    from lakeline.cli.shared import workspace_of
    from lakeline.dependencies.files import load_items
    from lakeline.operations.check import checks_of, parse_partition, run_checks
    from lakeline.project.config import ProjectConfig

    try:
        path = project_file(config, workspace)
        if not path.is_file():
            raise LakelineError(f"no project file {path}: name the project's lakeline.yml with --config")
        project = ProjectConfig.load(path)
        items = load_items(project.dependencies)
        checks = checks_of(table, project.tables_settings, project.default_table, items)
        if not checks:
            raise LakelineError(f"{table} has no checks in {path} (its table settings or its dependency item)")
        where = parse_partition(partition or [])
        ws = workspace_of(project, workspace)
        run = _statements(ws, path, reads_deployment(deployed, ws.root))
    except LakelineError as error:
        fail(str(error))
    try:
        report = run_checks(checks, table, where, run)
    except (LakelineError, QueryError) as error:
        fail(str(error), code=1)
    _print(report)
    if report.blocked:
        raise typer.Exit(1)


def _statements(ws: Workspace, project: Path, deployed: bool) -> Callable[[str], QueryResult]:
    """Where the checks' queries run: a running `lakeline up`'s Athena, else the workspace's SQL server (on the
    local deployment or the embedded Spark), as `lakeline sql` runs them."""
    from lakeline.cli.sql import _sql_engine
    from lakeline.project.sql_server import DEFAULT_KEEP_MINUTES

    if deployed:
        from lakeline.engines.athena import pyathena_statement
        from lakeline.runtimes.deployed.endpoint import reachable

        up = reachable(ws.root)
        if up is not None:
            connection = up.athena()
            return lambda sql: pyathena_statement(connection, sql)
    engine = _sql_engine(ws, True, DEFAULT_KEEP_MINUTES, project if deployed else None)
    return engine.execute


def _print(report: QualityReport) -> None:
    import json

    console = Console(soft_wrap=True, highlight=False)
    console.print(f"[bold]{escape(report.table)}[/]: {escape(report.summary)}")
    for result in report.results:
        verdict = "[green]passed[/]" if result.passed else f"[red]failed ({result.severity})[/]"
        metric = "" if result.metric is None else f" (metric {result.metric:g})"
        note = f" ({escape(result.note)})" if result.note else ""
        console.print(f"  {verdict} {escape(result.rule)}{metric}{note}")
        for row in result.sample:
            console.print(f"    {escape(json.dumps(row, separators=(',', ':')))}")
