"""``lakeline lineage trace | show | query``: one root's tree, from the table or the archive, and queries.

- ``trace --root ID`` rebuilds a root's tree from the lineage table (or a JSON Lines file of records)
  and prints it; with ``--archive`` it also writes the archive object, as the trace function does.
- ``show --root ID --archive DEST`` prints a root's tree as archived (folder or ``s3://``); ``show --table DB.T
  --partition COL=VALUE [--version V]`` prints the run that wrote a version of a partition (default: the newest
  archived, the published one), its inputs with their versions, its raw files, and the versions before and after.
- ``query`` runs ``athena_queries/lineage/lineage_records.sql`` (or ``--sql FILE``, its ``?`` bound to the
  ``--parameter`` values in order) on embedded Spark over a local archive folder, or on Athena through pyathena.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from lakeline import logs
from lakeline.cli.shared import (
    ConfigOption,
    EndpointOption,
    RegionOption,
    RuntimeOption,
    WorkspaceOption,
    err_console,
    reads_deployment,
    workspace_root,
)
from lakeline.console import EXIT_FAILED, fail
from lakeline.engines.base import QueryError, QueryResult
from lakeline.errors import InvalidInputError, LakelineError
from lakeline.lineage.records.archive import LOCAL_ARCHIVE_FOLDER
from lakeline.lineage.records.archive_table import DEFAULT_TABLE, LINEAGE_DATABASE
from lakeline.lineage.records.model import DEFAULT_TERMINAL_ACTIONS, check_lineage_id
from lakeline.lineage.records.tree import LineageNode, LineageTree, Status, build_tree

if TYPE_CHECKING:
    from lakeline.lineage.records.versions import PartitionVersion, VersionAnswer

console = Console()

RootOption = Annotated[str, typer.Option("--root", help="the root_id to trace")]
ArchiveOption = Annotated[
    str | None,
    typer.Option(
        help="archive folder or s3://bucket/prefix/ (default: WORKSPACE/lineage-archive, or WORKSPACE/deployed/"
        "lineage-archive for the local deployment's)"
    ),
]
DateOption = Annotated[str | None, typer.Option("--date", help="archive date YYYY-MM-DD (default: today, UTC)")]
JsonOption = Annotated[bool, typer.Option("--json", help="print JSON instead of a tree or table")]
LimitOption = Annotated[int, typer.Option(help="print at most this many nodes of the tree", min=1)]


def _parse_date(text: str | None) -> date | None:
    if text is None:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(f"--date {text!r} is not a date written YYYY-MM-DD") from None


def _s3_client(region: str | None, endpoint_url: str | None) -> Any:
    from lakeline.aws.clients import AwsClients

    return AwsClients(region, endpoint_url).s3


def _node_label(node: LineageNode, status: Status | None) -> Text:
    when = datetime.fromtimestamp(node.recorded_at, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
    label = Text.assemble(
        (node.action_taken or "?", "bold"), "  ", node.storage_location, "  ", (f"{node.node_id} · {when}", "dim")
    )
    if status is not None:
        style = "green" if status == "complete" else "yellow"
        label.append(f"  [{status}]", style=style)
    return label


def rich_tree(tree: LineageTree, statuses: dict[str, Status], limit: int) -> Tree:
    """A rich tree of at most ``limit`` nodes; every top hangs from the root."""
    root = Tree(Text.assemble(("root ", "bold"), tree.root_id))
    branches: dict[str, Tree] = {}
    for shown, (node, _depth) in enumerate(tree.walk()):
        if shown == limit:
            root.add(Text(f"... {len(tree.nodes) - limit} more nodes (raise --limit)", style="dim"))
            break
        problem = tree.tops.get(node.node_id)
        parent_branch = root if node.node_id in tree.tops else branches[node.parent_id]
        label = _node_label(node, statuses.get(node.node_id))
        if node.node_id in tree.tops and problem:
            label = Text.assemble((f"({problem}: parent {node.parent_id}) ", "red"), label)
        branches[node.node_id] = parent_branch.add(label)
    return root


def tree_json(tree: LineageTree, statuses: dict[str, Status]) -> dict[str, Any]:
    return {
        "root_id": tree.root_id,
        "nodes": len(tree.nodes),
        "statuses": tree.status_counts() if not statuses else _count(statuses.values()),
        "lines": [
            {"record_id": line.record_id, "status": statuses.get(line.record_id, line.status), "path": line.path}
            for line in tree.lines
        ],
    }


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def _print_tree(tree: LineageTree, statuses: dict[str, Status], as_json: bool, limit: int) -> None:
    if as_json:
        sys.stdout.write(json.dumps(tree_json(tree, statuses), indent=2) + "\n")
        return
    console.print(rich_tree(tree, statuses, limit))
    counts = ", ".join(f"{count} {status}" for status, count in sorted(_count(statuses.values()).items()))
    console.print(f"{len(tree.nodes)} nodes, {len(tree.lines)} records ({counts or 'none'})")


def _nodes_from_file(path: Path, root_id: str) -> list[LineageNode]:
    nodes: list[LineageNode] = []
    try:
        text = path.read_text()
    except OSError as error:
        raise InvalidInputError(f"cannot read records from {path}: {error}") from error
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            node = LineageNode.from_values(json.loads(line))
        except ValueError as error:
            raise InvalidInputError(f"{path} line {number} is not a JSON lineage record: {error}") from None
        if node.root_id == root_id:
            nodes.append(node)
    return nodes


def trace_command(
    root: RootOption,
    table: Annotated[str | None, typer.Option(help="lineage table name (DynamoDB)")] = None,
    records: Annotated[Path | None, typer.Option(help="JSON Lines file of lineage records instead")] = None,
    archive: Annotated[str | None, typer.Option(help="also archive into this folder or s3://bucket/prefix/")] = None,
    trace_date: DateOption = None,
    terminal_action: Annotated[
        list[str] | None, typer.Option(help="terminal action (repeatable; default: the built-in set)")
    ] = None,
    region: RegionOption = None,
    endpoint_url: EndpointOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = 200,
) -> None:
    """Rebuild one root's tree from the lineage table (or a records file) and print it."""
    from botocore.exceptions import BotoCoreError, ClientError

    from lakeline.lineage.records.archive import open_archive
    from lakeline.lineage.records.compact import compact_day
    from lakeline.lineage.records.trace import TraceSettings, archive_tree, mark_traced, read_root_nodes

    try:
        if (table is None) == (records is None):
            raise InvalidInputError("give exactly one source: --table NAME or --records FILE")
        check_lineage_id(root, "--root")  # before any call
        started = datetime.now(UTC)
        day = _parse_date(trace_date) or started.date()
        settings = TraceSettings(
            terminal_actions=frozenset(terminal_action) if terminal_action else DEFAULT_TERMINAL_ACTIONS
        )
        store = open_archive(archive, lambda: _s3_client(region, endpoint_url)) if archive else None
        dynamodb = None
        if table is not None:
            from lakeline.aws.clients import AwsClients

            dynamodb = AwsClients(region, endpoint_url).dynamodb
            nodes = read_root_nodes(dynamodb, table, root)
        else:
            assert records is not None
            nodes = _nodes_from_file(records, root)
        tree = build_tree(root, nodes, settings.terminal_actions)
        if store is not None:
            written = archive_tree(tree, store, day, archived_at=started, action=settings.trace_action)
            if written is not None:
                if dynamodb is not None and table is not None:
                    mark_traced(dynamodb, table, root, started, settings.marker_retention)
                compacted = compact_day(store, day)  # queryable now, not at the next compaction
                into = ", ".join(store.location(key) for key in compacted.written) or written[1]
                err_console.print(f"archived {len(tree.lines)} records to {into}")
    except LakelineError as error:
        fail(str(error))
    except (BotoCoreError, ClientError) as error:
        fail(f"AWS call failed: {error}")
    if not tree.nodes:
        fail(f"root {root!r} has no lineage records", code=EXIT_FAILED)
    _print_tree(tree, {line.record_id: line.status for line in tree.lines}, as_json, limit)


def show_command(
    root: Annotated[str | None, typer.Option("--root", help="the root_id whose tree to print")] = None,
    table: Annotated[str | None, typer.Option("--table", help="DATABASE.TABLE: a partition's versions")] = None,
    partition: Annotated[
        list[str] | None,
        typer.Option("--partition", help="with --table: COL=VALUE (repeat it, or COL=VALUE/COL2=VALUE2)"),
    ] = None,
    version: Annotated[
        str | None,
        typer.Option("--version", help="with --table: 3, v3 or v3.<run token> (default: the newest archived)"),
    ] = None,
    archive: ArchiveOption = None,
    config: ConfigOption = None,
    workspace: WorkspaceOption = None,
    deployed: RuntimeOption = None,
    trace_date: Annotated[str | None, typer.Option("--date", help="only this archive date YYYY-MM-DD")] = None,
    region: RegionOption = None,
    endpoint_url: EndpointOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = 200,
) -> None:
    """Print one root's tree as archived (every date, or one); or, with --table and --partition, which run
    wrote a version of the partition, from which versions of which inputs and raw files, and the versions
    before and after it."""
    from lakeline.lineage.records.archive import open_archive, read_root_lines

    if table is not None or partition or version is not None:
        if root is not None:
            fail("give --root (a tree) or --table with --partition (a partition's version), not both")
        _show_version(
            table, partition or [], version, archive, config, workspace, deployed, region, endpoint_url, as_json
        )
        return
    try:
        if root is None:
            raise InvalidInputError("give --root ID, or --table DB.TABLE --partition COL=VALUE")
        check_lineage_id(root, "--root")
        destination = archive or str(_archive_folder(workspace_root(config, workspace), deployed))
        store = open_archive(destination, lambda: _s3_client(region, endpoint_url))
        lines = read_root_lines(store, root, _parse_date(trace_date))
    except LakelineError as error:
        fail(str(error))
    if not lines:
        fail(f"root {root!r} has no archived lines in {destination}", code=EXIT_FAILED)
    nodes: dict[str, LineageNode] = {}
    statuses: dict[str, Status] = {}
    for line in lines:  # later dates come later and win
        for node in line.nodes():
            nodes[node.node_id] = node
        statuses[line.record_id] = line.status
    tree = build_tree(root, nodes.values(), DEFAULT_TERMINAL_ACTIONS)
    _print_tree(tree, statuses, as_json, limit)


def _show_version(
    table: str | None,
    partition: list[str],
    version: str | None,
    archive: str | None,
    config: Path | None,
    workspace: Path | None,
    deployed: bool | None,
    region: str | None,
    endpoint_url: str | None,
    as_json: bool,
) -> None:
    """``show --table --partition [--version]``: one version of a partition, from the archive."""
    from lakeline.commits.versions import parse_version
    from lakeline.lineage.records.archive import open_archive
    from lakeline.lineage.records.versions import (
        VersionNotFound,
        answer,
        archive_nodes,
        archived_partitions,
        partition_versions,
    )

    try:
        name, path = _partition_of(table, partition)
        wanted = parse_version(version) if version is not None else None
        destination = archive or str(_archive_folder(workspace_root(config, workspace), deployed))
        nodes = archive_nodes(open_archive(destination, lambda: _s3_client(region, endpoint_url)), name)
    except LakelineError as error:
        fail(str(error))
    try:
        result = answer(partition_versions(nodes, name, path), name, path, wanted)
    except VersionNotFound as missing:
        hint = ""
        if missing.partition_missing:  # name what is there: another partition, or nothing of the table
            known = archived_partitions(nodes, name)
            hint = f"; archived partitions: {', '.join(known)}" if known else f"; {name} has no archived versions"
        fail(f"{missing}{hint} (archive {destination})", code=EXIT_FAILED)
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
        return
    _print_version(result)


def _partition_of(table: str | None, partition: list[str]) -> tuple[str, str]:
    """``(database.table, col=value/...)`` from the options, each name and value checked."""
    from lakeline.dependencies.resolve import check_partition, partition_path
    from lakeline.names import check_qualified_table

    if table is None or not partition:
        raise InvalidInputError("a partition's version needs --table DATABASE.TABLE and --partition COL=VALUE")
    database, name = check_qualified_table(table, "--table")
    values: dict[str, str] = {}
    for option in partition:
        for part in option.split("/"):
            column, equals, value = part.partition("=")
            if not equals or column in values:
                raise InvalidInputError(f"--partition {option!r}: write each column once, as COL=VALUE")
            values[column] = value
    return f"{database}.{name}", partition_path(check_partition(values, "--partition"))


def _version_lines(version: PartitionVersion, indent: str = "  ") -> list[str]:
    when = datetime.fromtimestamp(version.recorded_at, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = [
        f"{indent}written by  {version.job_name or '(no job)'} run {version.run_id or '(no run id)'} (recorded {when})",
        f"{indent}location    {version.location}",
    ]
    for read in version.inputs:
        lines.append(f"{indent}input       {read.dataset or '?'} {read.version or '(no version)'}  {read.location}")
    for raw in version.raw_files:
        lines.append(f"{indent}raw file    {raw}")
    return lines


def _print_version(result: VersionAnswer) -> None:
    shown = result.version
    place = f"{result.known.index(shown.token) + 1} of {len(result.known)} archived"
    newest = ", the newest" if result.after is None else ""
    console.print(
        Text.assemble((f"{result.table} {result.partition}", "bold"), f"  version {shown.token} ({place}{newest})"),
        soft_wrap=True,
    )
    for line in _version_lines(shown):
        console.print(line, soft_wrap=True, highlight=False, markup=False)
    for label, other in (("before", result.before), ("after", result.after)):
        if other is None:
            console.print(f"{label}: none archived", highlight=False)
            continue
        console.print(Text.assemble((f"{label}: ", "bold"), other.token), soft_wrap=True)
        for line in _version_lines(other):
            console.print(line, soft_wrap=True, highlight=False, markup=False)


def _archive_folder(workspace: Path, deployed: bool | None) -> Path:
    """The workspace's copy of the lineage archive: the local deployment's (its archive bucket, copied at
    the end of each run) or the embedded runtime's, as ``--deployed``/``--embedded`` or the last run says."""
    if workspace.is_dir():
        logs.to_workspace(workspace.resolve())
    return (workspace / "deployed" if reads_deployment(deployed, workspace) else workspace) / LOCAL_ARCHIVE_FOLDER


def _print_result(result: QueryResult, as_json: bool) -> None:
    if as_json:
        rows = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
        sys.stdout.write(json.dumps(rows, indent=2, default=str) + "\n")
        return
    table = Table(show_lines=False)
    for column in result.columns:
        table.add_column(column, overflow="fold")
    for row in result.rows:
        table.add_row(*("" if value is None else str(value) for value in row))
    console.print(table)
    console.print(f"{len(result.rows)} rows")


def query_command(
    sql: Annotated[
        Path | None, typer.Option(help="query file (default athena_queries/lineage/lineage_records.sql)")
    ] = None,
    engine: Annotated[str, typer.Option(help="spark (local archive folder) or athena")] = "spark",
    archive: Annotated[
        Path | None,
        typer.Option(
            help="local archive folder (spark; default WORKSPACE/lineage-archive, or WORKSPACE/deployed/"
            "lineage-archive for the local deployment's)"
        ),
    ] = None,
    config: ConfigOption = None,
    workspace: WorkspaceOption = None,
    deployed: RuntimeOption = None,
    database: Annotated[str, typer.Option(help="database of the archive table")] = LINEAGE_DATABASE,
    table: Annotated[str, typer.Option(help="archive table")] = DEFAULT_TABLE,
    s3_staging_dir: Annotated[str | None, typer.Option(help="Athena result location s3://...")] = None,
    work_group: Annotated[str | None, typer.Option(help="Athena work group")] = None,
    region: RegionOption = None,
    parameter: Annotated[
        list[str] | None,
        typer.Option(
            "--parameter",
            help="a value for the query's next ? (repeat it, in order), bound as a string literal: e.g. "
            "partition_version.sql's table, partition and version ('' for the newest)",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run an archive query (the seed's UNNEST query by default) on Spark or Athena."""
    from lakeline.lineage.records.query import (
        AthenaTarget,
        bind_parameters,
        load_query,
        query_athena,
        query_local_archive,
    )

    try:
        text = load_query(sql)
        if parameter:
            named = {f"--parameter {number}": value for number, value in enumerate(parameter, start=1)}
            text = bind_parameters(text, "query", named).sql("athena")
        if engine == "athena":
            result = query_athena(
                text,
                AthenaTarget(
                    s3_staging_dir=s3_staging_dir,
                    work_group=work_group,
                    region_name=region,
                    database=database,
                    table=table,
                ),
            )
        elif engine == "spark":
            from lakeline.engines.spark import SparkEngine
            from lakeline.project.workspace import Workspace

            ws = Workspace.at(workspace_root(config, workspace))
            folder = archive or _archive_folder(ws.root, deployed)
            with err_console.status("starting embedded Spark"):
                spark = SparkEngine.local(ws.root)
            result = query_local_archive(spark, folder, text, database=database, table=table)
        else:
            raise InvalidInputError(f"--engine must be spark or athena, not {engine!r}")
    except QueryError as error:
        fail(str(error), code=EXIT_FAILED)
    except LakelineError as error:
        fail(str(error))
    _print_result(result, as_json)


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command("trace")(trace_command)
    app.command("show", short_help="Which run wrote a partition version, from which inputs and raw files.")(
        show_command
    )
    app.command("query")(query_command)
