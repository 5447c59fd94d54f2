"""Undoing what runs of a killed command left in the workspace before its pipeline state was saved (#37).

The embedded runtime saves the pipeline state when a batch ends; a command killed before that (``kill -9``,
a closed laptop, a full disk) leaves the state as it was before the batch, while the metastore may already
point partitions at versions its runs published, and run prefixes hold what they wrote. The state is the
truth: it says which version of each partition holds which arrivals. So before anything runs, every
partition the metastore points at a version the state does not know is pointed back at the state's
published version (or dropped, if the state has none), and every run prefix no one references any more is
deleted, through the guarded delete (``ObjectStore.delete_prefix``). The batch then runs again whole, as
its arrivals are not applied in the state: the same arrivals plan the same runs, whose prefixes are free.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from lakeline.commits import PartitionCommits, commit_key, parse_retired, with_manifests
from lakeline.dependencies.resolve import partition_path
from lakeline.engines.spark import SparkEngine
from lakeline.names import ddl_name, string_literal
from lakeline.storage import RUN_PREFIX, RUN_TOKEN_PATTERN, DeleteRefused, ObjectStore, local_root, prefix_uri

logger = logging.getLogger(__name__)


@dataclass
class Undone:
    pointed_back: list[str] = field(default_factory=list)  # "db.table (col=value)" pointed at the state's version
    dropped: list[str] = field(default_factory=list)  # partitions the state has no version of
    deleted: list[str] = field(default_factory=list)  # run prefixes no one references
    kept: list[str] = field(default_factory=list)  # run prefixes the delete guard refused (logged)

    def __bool__(self) -> bool:
        return bool(self.pointed_back or self.dropped or self.deleted)

    def described(self) -> str:
        parts = [
            f"{len(self.pointed_back)} partitions pointed back at their saved versions" if self.pointed_back else "",
            f"{len(self.dropped)} partitions the saved state has no version of dropped" if self.dropped else "",
            f"{len(self.deleted)} run folders no saved version references deleted" if self.deleted else "",
        ]
        return "; ".join(part for part in parts if part)


def _run_folder(location: str) -> bool:
    name = location.rstrip("/").rsplit("/", 1)[-1]
    return name.startswith(RUN_PREFIX) and bool(RUN_TOKEN_PATTERN.fullmatch(name[len(RUN_PREFIX) :]))


def undo_unsaved_runs(engine: SparkEngine, commits: PartitionCommits, store: ObjectStore, zones: list[Path]) -> Undone:
    """Bring the metastore and the run folders under ``zones`` (the stage and analytics folders) back to the
    pipeline state just restored (leases of the killed command are not restored: none is live)."""
    states = {state.key: state for state in commits.partitions()}
    undone = Undone()
    referenced: set[str] = set()
    for state in states.values():
        # With their manifests' prefixes, which hold what each version applied (lakeline.commits.applied).
        referenced |= with_manifests([state.published] if state.published else [])
        referenced |= with_manifests(parse_retired(entry)[1] for entry in state.retired)
        # And the run whose batch is taken: its object is the only record of those arrivals (#39).
        referenced |= with_manifests([state.taken.run] if state.taken else [])
    tables: dict[str, str] = {}  # a table's root → ``database.table``
    for entry in engine.catalog_locations():
        location = prefix_uri(entry.location)
        if not entry.partition:
            tables[_parent(location) if _run_folder(location) else location] = f"{entry.database}.{entry.table}"
        if not _run_folder(location):
            continue
        kept = states.get(commit_key(f"{entry.database}.{entry.table}", partition_path(entry.partition)))
        saved = prefix_uri(kept.published) if kept is not None and kept.published else None
        if saved == location:
            continue
        name = ddl_name(entry.database, entry.table)
        spec = ", ".join(f"{ddl_name(key)} = {string_literal(value)}" for key, value in entry.partition.items())
        shown = f"{entry.database}.{entry.table} ({partition_path(entry.partition) or 'the table'})"
        if saved is not None:
            where = f" PARTITION ({spec})" if spec else ""
            engine.execute(f"ALTER TABLE {name}{where} SET LOCATION {string_literal(saved)}")
            undone.pointed_back.append(shown)
        elif spec:
            engine.execute(f"ALTER TABLE {name} DROP IF EXISTS PARTITION ({spec})")
            undone.dropped.append(shown)
        else:  # an unpartitioned table whose first version is the killed command's: back to its own folder
            engine.execute(f"ALTER TABLE {name} SET LOCATION {string_literal(_parent(location))}")
            undone.dropped.append(shown)
    for zone in zones:
        for folder in sorted(zone.rglob(f"{RUN_PREFIX}*")) if zone.is_dir() else []:
            location = local_root(folder)
            if not folder.is_dir() or not _run_folder(location) or prefix_uri(location) in referenced:
                continue
            table_root = _parent(location)
            while "=" in table_root.rstrip("/").rsplit("/", 1)[-1]:  # up past the partition folders
                table_root = _parent(table_root)
            qualified = tables.get(table_root)
            if qualified is None:
                logger.warning("%s is a run folder of no table in the metastore: left", location)
                continue
            try:
                store.delete_prefix(location, table_root=table_root, table=qualified)
            except DeleteRefused as refused:
                logger.warning("%s stays: %s", location, refused)
                undone.kept.append(location)
                continue
            undone.deleted.append(location)
    return undone


def _parent(location: str) -> str:
    return prefix_uri(location.rstrip("/").rsplit("/", 1)[0])
