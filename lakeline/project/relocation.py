"""A workspace that was copied or moved keeps working where it is now, and never reads or writes where
it was.

The embedded metastore stores every table's and partition's location as an absolute URI, and the
pipeline state (``state/pipeline-state.json``) stores the partitions' published versions and run
prefixes the same way: a copied project would read, and write, the original's folders. So the
workspace records where it and its raw folder were (``metastore/lakeline-roots.json``); when it is opened elsewhere,
every location under an old root is pointed at the same place under the new one, in the metastore (one
catalog write per table) and in the saved pipeline state, before anything runs. A workspace without the
record (made before it existed) is taken to be where it was made. Lineage already archived keeps the
locations it was written with: it is the record of what ran where.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from lakeline.catalog_locations import set_local_catalog
from lakeline.engines.spark import SparkEngine
from lakeline.project.workspace import Workspace, write_json
from lakeline.storage import local_root, normalize_location

Notify = Callable[[str], None]


def roots_file(workspace: Workspace) -> Path:
    # With the metastore it describes: resetting the pipeline state (state/) keeps it.
    return workspace.root / "metastore" / "lakeline-roots.json"


def _recorded(workspace: Workspace) -> tuple[Path, Path | None] | None:
    """Where the workspace and its raw folder were (the raw folder ``None`` if never told)."""
    try:
        data = json.loads(roots_file(workspace).read_text())
        return Path(data["workspace"]), Path(data["raw"]) if data.get("raw") else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _inferred(engine: SparkEngine, workspace: Workspace) -> tuple[Path, Path] | None:
    """Where a workspace made before its record existed was made: its metastore's ``default``
    database lies in the warehouse folder of the workspace that created it. Its raw folder is taken
    to have been where it is now relative to the workspace."""
    location = normalize_location(str(engine.session.catalog.getDatabase("default").locationUri or ""))
    if not location.startswith("file://"):
        return None
    warehouse = Path(unquote(location[len("file://") :]).rstrip("/"))
    if warehouse.name != "warehouse" or warehouse.parent == workspace.root:
        return None
    old_root = warehouse.parent
    return old_root, Path(os.path.normpath(old_root / os.path.relpath(workspace.raw_dir, workspace.root)))


def moves_since(
    workspace: Workspace, recorded: tuple[Path, Path | None] | None
) -> tuple[list[tuple[str, str]], Path | None]:
    """(old root, new root) URIs of what moved with the workspace, the longest first, and where its raw
    folder is now (``None``: not known). Only a moved workspace moves anything: a command that names
    another raw folder for a workspace that stayed is not a move. The raw folder moved with it if it
    sits at the same place relative to it (a project copied whole); a raw folder elsewhere that is
    still there stayed."""
    if recorded is None or recorded[0] == workspace.root:
        return [], recorded[1] if recorded else None
    old_root, old_raw = recorded
    moves = [(local_root(old_root), local_root(workspace.root))]
    raw = old_raw
    if old_raw is None:
        pass  # never told where it was: only what lies in the workspace moves
    elif not old_raw.is_relative_to(old_root):
        carried = Path(os.path.normpath(workspace.root / os.path.relpath(old_raw, old_root)))
        if carried.exists() or not old_raw.exists():
            raw = carried
            moves.append((local_root(old_raw), local_root(carried)))
    else:
        raw = workspace.root / old_raw.relative_to(old_root)
    return sorted(moves, key=lambda pair: -len(pair[0])), raw


def mover(moves: list[tuple[str, str]]) -> Callable[[str], str | None]:
    """The new location of a location under an old root (as the catalog writes it: ``file:/x``,
    percent-escaped or not); ``None`` for any other."""

    def moved(location: str) -> str | None:
        for text in dict.fromkeys((normalize_location(location), unquote(normalize_location(location)))):
            for old, new in moves:
                if text.startswith(old) or text + "/" == old:
                    return new + text[len(old) :]
        return None

    return moved


def _rewritten(value: Any, moves: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        for old, new in moves:
            value = value.replace(old, new)
        return value
    if isinstance(value, list):
        return [_rewritten(item, moves) for item in value]
    if isinstance(value, dict):
        return {key: _rewritten(item, moves) for key, item in value.items()}
    return value


def relocate(engine: SparkEngine, workspace: Workspace, pipeline_state: Path, notify: Notify) -> None:
    """Point what the workspace stores at where it is now, and record where that is."""
    recorded = _recorded(workspace)
    moves, raw = moves_since(workspace, recorded or _inferred(engine, workspace))
    if moves:
        relocated = engine.relocate(mover(moves))
        if pipeline_state.exists():
            write_json(pipeline_state, _rewritten(json.loads(pipeline_state.read_text()), moves))
        shown = ", ".join(f"{old} → {new}" for old, new in moves)
        notify(
            f"the workspace moved ({shown}): {relocated.tables} tables and {relocated.partitions} partitions "
            "point at it now"
        )
        if relocated.stuck_databases:
            notify(
                f"databases {', '.join(relocated.stuck_databases)} keep their old location (the metastore cannot "
                "move a database): create tables in them with a LOCATION, or they are written there"
            )
    # A command given the raw folder (a project's lakeline.yml) says where it is; one that is not told
    # (``--workspace`` alone) keeps what was recorded.
    raw = workspace.raw or raw
    if moves or recorded != (workspace.root, raw):
        write_json(roots_file(workspace), {"workspace": str(workspace.root), "raw": str(raw) if raw else None})


# Raw files up to this size make a small lake, whose Spark starts with the quick-start JVM.
QUICK_START_MAX_RAW_BYTES = 256 * 1024**2


def small_lake(raw_dir: Path, limit: int = QUICK_START_MAX_RAW_BYTES) -> bool:
    """Whether the raw files under ``raw_dir`` hold at most ``limit`` bytes (it stops counting past it)."""
    total = 0
    for folder, _, names in os.walk(raw_dir):
        for name in names:
            with suppress(OSError):  # a file removed while counted
                total += Path(folder, name).stat().st_size
            if total > limit:
                return False
    return True


def claim_workspace(workspace: Workspace, notify: Notify) -> None:
    """Own the workspace (its embedded Spark) for the rest of this process: a ``lakeline sql`` server
    holding it is stopped; another command holding it is named in ``WorkspaceBusy``."""
    from lakeline.project import sql_server
    from lakeline.project.engine_owner import claim

    def stop_server(workspace: Workspace) -> None:
        if sql_server.stop(workspace):
            notify("stopped the workspace's SQL server (`lakeline sql` starts it again)")

    claim(workspace, stop_server=stop_server)


def open_engine(workspace: Workspace, notify: Notify, **session_options: Any) -> SparkEngine:
    """The workspace's embedded Spark, owned by this process (``claim_workspace``), relocated if the
    workspace moved. A workspace whose raw files are few gets the quick-start JVM (``local_spark_session``)."""
    claim_workspace(workspace, notify)
    session_options.setdefault("quick_start", small_lake(workspace.raw_dir))
    engine = SparkEngine.local(workspace.root, **session_options)
    relocate(engine, workspace, workspace.pipeline_state_file, notify)
    # The functions the embedded runtime runs in-process delete run prefixes through their own stores;
    # this metastore is what those stores ask before they do (``ObjectStore.delete_prefix``).
    set_local_catalog(engine)
    return engine
