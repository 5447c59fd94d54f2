"""``lakeline glue ...`` commands."""

from __future__ import annotations

import typer

glue_app = typer.Typer(
    help="Glue scanner: extract catalog and jobs, derive lineage from job scripts.", no_args_is_help=True
)
