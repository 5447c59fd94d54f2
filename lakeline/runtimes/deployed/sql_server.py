"""``lakeline sql`` on a project's local deployment without standing it up for every call.

Standing the deployment up (synth, deploy on the local endpoint, its kept state put back) takes about half a
minute. So ``lakeline sql`` on the deployment starts this server in the background, as it starts
``lakeline.project.sql_server`` for the embedded runtime (the same socket, record, idle time and stop): it
stands the deployment up once and answers each statement through its Athena workgroup with pyathena, as
``lakeline sql --no-server`` does. What a statement may change (anything but a query, SHOW, DESCRIBE or
EXPLAIN) is kept in ``deployed/state/`` once the deployment is at rest again, so the server can be stopped
at any moment between statements. Any other command on the workspace stands up a deployment of its own,
which claims the workspace and stops this server first (``engine_owner``), so two never hold it at once.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlglot
from rich.console import Console
from sqlglot import exp

from lakeline.engines.base import QueryResult
from lakeline.errors import LakelineError
from lakeline.project.config import ProjectConfig
from lakeline.project.sql_server import DEPLOYED, serve
from lakeline.project.workspace import Workspace
from lakeline.runtimes.deployed.operator import operation_errors
from lakeline.runtimes.deployed.run import DeployedProject

MODULE = "lakeline.runtimes.deployed.sql_server"
LOOKING = ("SHOW", "DESCRIBE", "DESC", "EXPLAIN")


def changes_nothing(statement: str) -> bool:
    """Whether ``statement`` only looks (a query, SHOW, DESCRIBE, EXPLAIN): nothing to keep after it."""
    try:
        tree = sqlglot.parse_one(statement, read="athena")
    except sqlglot.errors.ParseError:
        return False  # Athena will say what is wrong; keeping costs a moment
    if isinstance(tree, exp.Query | exp.Describe | exp.Show):
        return True
    return isinstance(tree, exp.Command) and str(tree.this).upper() in LOOKING


class DeployedStatements:
    """Statements through the deployment's Athena, what each changes kept once the deployment is at rest."""

    def __init__(self, project: DeployedProject) -> None:
        self.project = project

    def execute(self, statement: str) -> QueryResult:
        try:
            return self.project.operator.athena_result(statement)
        except operation_errors() as error:
            raise LakelineError(str(error)) from error
        finally:
            if not changes_nothing(statement):
                # What the statement set going (rows written into a raw table arrive) ends before it is kept.
                self.project.system.executions.wait(timeout=3600)
                self.project.keep()


def serving_arguments(config: Path) -> list[str]:
    """What ``sql_server.connect`` starts for a deployed server of the project ``config``."""
    return [MODULE, "--config", str(config.resolve())]


@contextmanager
def _deployment(arguments: argparse.Namespace, workspace: Workspace, notes: list[str]) -> Iterator[DeployedStatements]:
    if arguments.config is None:
        raise LakelineError("a deployed SQL server needs the project's --config")
    project = DeployedProject(ProjectConfig.load(arguments.config), Console(file=sys.stdout), keep_results=True)
    if project.workspace.root != workspace.root:
        raise LakelineError(f"{workspace.root} is not the workspace of the project {arguments.config}")
    project.require_kept()
    try:
        with project:
            yield DeployedStatements(project)
    except operation_errors() as error:
        if isinstance(error, LakelineError):
            raise
        raise LakelineError(f"the local deployment could not be stood up: {error}") from error


def main(argv: list[str] | None = None) -> None:
    serve(argv, DEPLOYED, _deployment, f"python -m {MODULE}")


if __name__ == "__main__":
    # By its own name, so the replies it pickles name importable classes (not ``__main__``'s).
    from lakeline.runtimes.deployed.sql_server import main as serve_deployment

    serve_deployment()
