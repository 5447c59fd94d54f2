"""``lakeline deps ...`` commands."""

from __future__ import annotations

import typer

deps_app = typer.Typer(
    help="Dependency items: validate, store, list, backfill and resolve.", no_args_is_help=True
)
