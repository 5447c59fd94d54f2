"""``lakeline lineage ...`` commands, registered by the modules that implement them."""

from __future__ import annotations

import typer

from lakeline.cli import lineage_columns as columns_cli
from lakeline.cli import lineage_records as records_cli

lineage_app = typer.Typer(
    help="Lineage records, archive queries, OpenLineage and column lineage.", no_args_is_help=True
)
records_cli.register(lineage_app)
columns_cli.register(lineage_app)
