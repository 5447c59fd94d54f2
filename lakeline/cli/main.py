"""The ``lakeline`` app: its help, and every command and group in the order ``--help`` lists them.
The commands live in the modules of their subject; this module only puts them together."""

from __future__ import annotations

import typer

from lakeline.cli import dlq, reprocess, run, sql, stages, status
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

app.command("demo")(run.demo)
app.command("sql")(sql.run_sql)
app.command("run")(run.run_project)
app.command("status")(status.status)
app.command("reprocess")(reprocess.reprocess_command)
app.command("watch")(run.watch_project)

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
