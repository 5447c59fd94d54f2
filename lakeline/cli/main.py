"""The ``lakeline`` app: its help, and every command and group in the order ``--help`` lists them.
The commands live in the modules of their subject; this module only puts them together."""

from __future__ import annotations

import typer

from lakeline.cli import check, dlq, reprocess, run, sql, stages, status, up
from lakeline.cli.deps import deps_app
from lakeline.cli.glue import glue_app
from lakeline.cli.lineage import lineage_app
from lakeline.logs import capture

app = typer.Typer(
    help="Lakeline: an event-driven data lake pipeline with lineage.",
    epilog="Exit codes, for every command: 0 done; 1 the command ran and something failed, was refused or "
    "was left out (it says what); 2 the command could not run as asked (an option, a file, the "
    "configuration, a full disk, or AWS).",
    no_args_is_help=True,
)

# One line each in ``lakeline --help``; the whole story is in each command's own ``--help``.
app.command("demo", short_help="Run the pipeline on generated sample data, with no AWS account.")(run.demo)
app.command("sql", short_help="Run Athena SQL on what the project's last run left.")(sql.run_sql)
app.command("run", short_help="Run the pipeline over the project's folders: every new or changed raw file.")(
    run.run_project
)
app.command("status", short_help="What the pipeline holds, what waits and what failed.")(status.status)
app.command("check", short_help="Run a table's quality checks over what is published.")(check.check_command)
app.command("reprocess", short_help="Rebuild what a range of a table's partitions feeds (backfills, fixes).")(
    reprocess.reprocess_command
)
app.command("watch", short_help="Process files as they land in the project's raw folder, until Ctrl-C.")(
    run.watch_project
)
app.command("up", short_help="Keep the project's local deployment up as an AWS endpoint, until stopped.")(up.up)
app.command("down", short_help="Stop the `lakeline up` of the project, keeping its state.")(up.down)

app.add_typer(stages.stage_a_app, name="stage-a")
app.add_typer(deps_app, name="deps")
app.add_typer(lineage_app, name="lineage")
app.add_typer(glue_app, name="glue")
app.add_typer(stages.stage_b_app, name="stage-b")
app.add_typer(dlq.dlq_app, name="dlq")


def main() -> None:
    """The ``lakeline`` command (its console script and ``python -m lakeline``): log lines go to the workspace's
    log file, not the terminal (``lakeline.logs``)."""
    capture()
    app(prog_name="lakeline")
