"""``lakeline deps ...`` commands.

Exit codes: 0 success; 1 invalid input (every problem listed) or a refused item (e.g. a cycle);
2 an operational failure (DynamoDB unreachable, a table missing).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from lakeline.cli.shared import EndpointOption, RegionOption
from lakeline.console import EXIT_FAILED, fail
from lakeline.dependencies.files import load_items
from lakeline.dependencies.model import DependencyItemError, parse_dependency_item
from lakeline.dependencies.store import DEFAULT_BY_TABLE_TABLE, DEFAULT_DEPENDENCIES_TABLE, DependencyStore
from lakeline.errors import InvalidInputError, LakelineError

if TYPE_CHECKING:
    from lakeline.dependencies.model import DependencyItem

deps_app = typer.Typer(help="Dependency items: validate, store, list, backfill and resolve.", no_args_is_help=True)

_err = Console(stderr=True)

TableOption = Annotated[str, typer.Option("--table", help="the dependencies table")]
ByTableOption = Annotated[str, typer.Option("--by-table-table", help="the dependencies-by-table table")]
ItemPaths = Annotated[
    list[Path], typer.Argument(help="JSON files (one item or a list of items each) or folders of them")
]


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _load_items(paths: list[Path]) -> list[DependencyItem]:
    """Items of files (one item, a JSON object, or several, a JSON array) and folders of them; every
    problem of every item is listed."""
    try:
        return load_items(paths)
    except DependencyItemError as error:
        fail(error.what, problems=error.problems, code=EXIT_FAILED)


def _store(table: str, by_table_table: str, region: str | None, endpoint_url: str | None) -> DependencyStore:
    from lakeline.aws.clients import AwsClients

    client = AwsClients(region, endpoint_url).dynamodb
    return DependencyStore(client, table, by_table_table)


def _aws_errors() -> tuple[type[Exception], ...]:
    from botocore.exceptions import BotoCoreError, ClientError

    return (BotoCoreError, ClientError)


@deps_app.command("validate", short_help="Check dependency items and that they close no dependency cycle.")
def validate(paths: ItemPaths) -> None:
    """Check dependency items, and that together they close no dependency cycle; exit 1 listing every
    problem."""
    from lakeline.dependencies.graph import cycle_problems

    items = _load_items(paths)
    cycles = cycle_problems({item.dataset: item.source_tables for item in items})
    if cycles:
        fail(
            f"{', '.join(map(str, paths))}: the items depend on each other in a cycle",
            problems=cycles,
            code=EXIT_FAILED,
        )
    _print_json({"valid": True, "datasets": [item.dataset for item in items]})


@deps_app.command("put")
def put(
    paths: ItemPaths,
    table: TableOption = DEFAULT_DEPENDENCIES_TABLE,
    by_table_table: ByTableOption = DEFAULT_BY_TABLE_TABLE,
    region: RegionOption = None,
    endpoint_url: EndpointOption = None,
) -> None:
    """Validate and store items in the dependencies table (refusing dependency cycles).

    The table's stream Lambda then updates dependencies-by-table; where it does not run (a local
    table), follow with ``lakeline deps backfill``.
    """
    items = _load_items(paths)
    store = _store(table, by_table_table, region, endpoint_url)
    try:
        store.put_items(items)
    except InvalidInputError as error:
        fail(str(error), code=EXIT_FAILED)
    except _aws_errors() as error:
        fail(f"DynamoDB: {error}")
    _print_json({"stored": [item.dataset for item in items]})


@deps_app.command("list", short_help="Print every stored item; invalid ones with their problems.")
def list_items(
    table: TableOption = DEFAULT_DEPENDENCIES_TABLE,
    region: RegionOption = None,
    endpoint_url: EndpointOption = None,
) -> None:
    """Print every stored item (normalised); invalid items are listed with their problems (exit 1)."""
    store = _store(table, DEFAULT_BY_TABLE_TABLE, region, endpoint_url)
    items: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    try:
        for image in store.scan_items():
            try:
                items.append(parse_dependency_item(image).to_item())
            except DependencyItemError as error:
                invalid.append({"dataset": str(image.get("dataset")), "errors": error.problems})
    except _aws_errors() as error:
        fail(f"DynamoDB: {error}")
    items.sort(key=lambda item: str(item["dataset"]))
    _print_json({"items": items, "invalid": invalid})
    if invalid:
        raise typer.Exit(1)


@deps_app.command("backfill", short_help="Rebuild dependencies-by-table from the dependencies table.")
def backfill_command(
    table: TableOption = DEFAULT_DEPENDENCIES_TABLE,
    by_table_table: ByTableOption = DEFAULT_BY_TABLE_TABLE,
    region: RegionOption = None,
    endpoint_url: EndpointOption = None,
) -> None:
    """Rebuild dependencies-by-table from the dependencies table (exit 1 if some items were invalid)."""
    from lakeline.dependencies.sync import backfill as rebuild

    store = _store(table, by_table_table, region, endpoint_url)
    try:
        report = rebuild(store)
    except _aws_errors() as error:
        fail(f"DynamoDB: {error}")
    _print_json(report.to_dict())
    if report.invalid:
        raise typer.Exit(1)


def _partition_option(values: list[str]) -> dict[str, str]:
    partition: dict[str, str] = {}
    for value in values:
        column, equals, text = value.partition("=")
        if not equals or not column:
            fail(f"--partition {value!r} must be written COLUMN=VALUE")
        if column in partition:
            fail(f"--partition column {column!r} given twice")
        partition[column] = text
    return partition


@deps_app.command("resolve", short_help="Print the target partition and the SQL steps one arrival would run.")
def resolve(
    item_file: Annotated[Path, typer.Option("--item", help="JSON file with one dependency item")],
    source_table: Annotated[str, typer.Option("--table", help="the finished source table, DB.TABLE")],
    partition: Annotated[
        list[str], typer.Option("--partition", help="its partition, COL=VALUE (repeat for more levels)")
    ],
    team: Annotated[
        str | None,
        typer.Option(help="team folder of sql_file under the queries root (default: the first word of db)"),
    ] = None,
    queries_root: Annotated[Path, typer.Option(help="folder holding <team>/*.sql for sql_file steps")] = Path(
        "athena_queries"
    ),
    environment: Annotated[str, typer.Option(help="the pipeline environment, the value of $environment")] = "",
) -> None:
    """Print the target partition and the fully substituted SQL steps one arrival would run (a list of
    them when the item's dependency has a TargetRange)."""
    from lakeline.dependencies.resolve import resolve_arrival, team_sql_reader

    items = _load_items([item_file])
    if len(items) != 1:
        fail(f"{item_file} must hold exactly one item, not {len(items)}", code=EXIT_FAILED)
    item = items[0]
    team_name = team or item.dataset.split(".")[0].split("_")[0]
    try:
        resolved = resolve_arrival(
            item,
            source_table,
            _partition_option(partition),
            team_sql_reader(queries_root, team_name),
            environment,
        )
    except LakelineError as error:
        fail(str(error), code=EXIT_FAILED)
    ranged = item.dependency_on(source_table).target_range is not None  # a list for a range, always
    _print_json([target.to_dict() for target in resolved] if ranged else resolved[0].to_dict())
