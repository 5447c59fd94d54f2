"""A run that did not end: what it wrote beyond the pipeline state it kept is undone before the next
one starts (#37).

The pipeline state is saved whole at the end of a batch (``LocalCloud.save_pipeline_state``); a run that
stops before (a full disk, a kill) keeps the state of before the batch, while its runs may already have
published partition versions: their prefixes are on disk and the catalog may point at them, yet the
state does not know them, nor that their arrivals were applied. The next run loads those arrivals again,
from the state's versions, under the same run tokens (a run token is made from its arrival), so each CTAS
would find its prefix taken ("cannot create table with location to a non-empty directory").

So a run leaves a mark (``begin``) that only a run whose state was saved removes (``end``); a run that
finds the mark points every partition the catalog has at a version the state does not know back at the
state's version (or drops it, if the state has none), and deletes those versions' prefixes: the
workspace is then what the state says, and the next run loads exactly what the stopped one did not.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lakeline.engines.spark import CatalogLocation, SparkEngine
from lakeline.errors import InvalidInputError
from lakeline.local.workspace import Workspace, write_json
from lakeline.names import ddl_name, string_literal
from lakeline.storage import RUN_PREFIX, DeleteRefused, LocalObjectStore, local_root, normalize_location


def mark(workspace: Workspace) -> Path:
    return workspace.root / "state" / "run-in-progress.json"


def begin(workspace: Workspace) -> None:
    """Mark the workspace as written by a run whose state is not saved yet (before its first write: if
    even this fails, nothing was written)."""
    write_json(mark(workspace), {"started": datetime.now(UTC).isoformat()})


def end(workspace: Workspace) -> None:
    """The run's state is saved: what it wrote is all in it."""
    mark(workspace).unlink(missing_ok=True)


def _locations(value: Any) -> Iterator[str]:
    """Every run prefix a pipeline-state item names, wherever in the item (published, retired, routed,
    a lease's): the state keeps them, so none of them is undone."""
    if isinstance(value, str):
        at = value.find("file:")
        if at >= 0 and RUN_PREFIX in value:
            where = normalize_location(value[at:])
            end_of_token = where.find("/", where.index(RUN_PREFIX))
            yield where if end_of_token < 0 else where[: end_of_token + 1]
    elif isinstance(value, dict):
        for each in value.values():
            yield from _locations(each)
    elif isinstance(value, list):
        for each in value:
            yield from _locations(each)


def _published(items: list[dict[str, Any]]) -> dict[str, str]:
    """Each partition's (or table's) root and the version the state says is published there."""
    published: dict[str, str] = {}
    for item in items:
        root, version = item.get("root", {}).get("S"), item.get("published", {}).get("S")
        if isinstance(root, str) and isinstance(version, str):
            published[normalize_location(root).rstrip("/") + "/"] = normalize_location(version)
    return published


def undo_unkept(engine: SparkEngine, workspace: Workspace, items: list[dict[str, Any]]) -> list[str]:
    """If the last run did not end (its mark is here), undo what it wrote that the pipeline state ``items``
    does not keep (see the module); return the prefixes deleted. Without a mark, nothing is touched."""
    if not mark(workspace).exists():
        return []
    kept = {location for item in items for location in _locations(item)}
    unkept = {local_root(prefix) for prefix in workspace.published_prefixes()} - kept
    published = _published(items)
    catalog = list(engine.locations())
    # Each table's root, before anything moves: an unpartitioned table's location is its published
    # version's prefix, so its root is the folder above.
    tables = {
        _parent(place.location) if _is_run_prefix(place.location) else place.location: place
        for place in catalog
        if place.partition is None
    }
    for place in catalog:
        if place.location in unkept:
            version = published.get(_parent(place.location))
            if version is None and place.partition is None:
                version = _parent(place.location)  # no version kept: the table's own folder, as first made
            _point_back(engine, place, version)
    store, deleted = LocalObjectStore(), []
    for prefix in sorted(unkept):
        roots = [root for root in tables if prefix.startswith(root) and prefix != root]
        if roots:
            table_root = max(roots, key=len)  # the innermost table holding it
            table = tables[table_root]
            try:  # the guarded delete: it refuses a prefix the catalog still points at, which is then kept
                store.delete_prefix(prefix, table_root=table_root, table=f"{table.database}.{table.table}")
            except (DeleteRefused, InvalidInputError):
                continue
            deleted.append(prefix)
    end(workspace)
    return deleted


def _parent(location: str) -> str:
    return location.rstrip("/").rsplit("/", 1)[0] + "/"


def _is_run_prefix(location: str) -> bool:
    return location.rstrip("/").rsplit("/", 1)[-1].startswith(RUN_PREFIX)


def _point_back(engine: SparkEngine, place: CatalogLocation, version: str | None) -> None:
    """Point a partition (or a table) the catalog has at an unkept version back at the state's ``version``;
    a partition the state has no version of is dropped (the stopped run added it)."""
    name = ddl_name(place.database, place.table)
    if place.partition is None:
        if version is not None:
            engine.execute(f"ALTER TABLE {name} SET LOCATION {string_literal(version)}")
        return
    spec = ", ".join(f"{ddl_name(column)} = {string_literal(value)}" for column, value in place.partition.items())
    if version is None:
        engine.execute(f"ALTER TABLE {name} DROP IF EXISTS PARTITION ({spec})")
    else:
        engine.execute(f"ALTER TABLE {name} PARTITION ({spec}) SET LOCATION {string_literal(version)}")


def describe(deleted: list[str]) -> str:
    """What ``undo_unkept`` did, in one line."""
    return (
        f"the last run stopped before it ended: {len(deleted)} partition versions it wrote that the pipeline state "
        "does not keep were undone (the catalog points at the kept versions again, and their files, e.g. "
        f"{deleted[0]}, are deleted); this run loads their arrivals again"
    )
