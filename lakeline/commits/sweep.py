"""The sweep: what no reader or writer of a partition can need any more is deleted, after a grace period."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from lakeline.commits.keys import commit_partition, commit_table_root, parse_retired
from lakeline.commits.state import PartitionState
from lakeline.commits.store import PartitionCommits
from lakeline.errors import InvalidInputError
from lakeline.storage import DeleteRefused, ObjectStore, manifest_prefix, prefix_uri

logger = logging.getLogger(__name__)

DEFAULT_GRACE_SECONDS = 3 * 60 * 60  # longer than a query planned before a swap may run


def referenced(state: PartitionState, now: float) -> set[str]:
    """Prefixes nobody may delete: the published one, a live run's, and the run's whose batch is taken (its
    object holds arrivals no run has loaded yet), and their manifests' prefixes
    (``lakeline.storage.manifest_prefix``)."""
    keep = {state.published} if state.published else set()
    if state.lease_location and state.leased(now):
        keep.add(state.lease_location)
    if state.taken is not None:
        keep.add(state.taken.run)
    return with_manifests(keep)


def with_manifests(locations: Iterable[str]) -> set[str]:
    """The run prefixes ``locations`` and their manifests' prefixes, which hold what each version applied
    (``lakeline.commits.applied``): a version's list goes only with the version."""
    listed = list(locations)
    return {prefix_uri(location) for location in listed} | {_manifests(location) for location in listed}


def _manifests(location: str) -> str:
    try:
        return manifest_prefix(location)
    except InvalidInputError:  # not a run prefix (a damaged item): nothing of its own to keep
        return prefix_uri(location)


def sweep_partition(
    commits: PartitionCommits,
    state: PartitionState,
    store: ObjectStore,
    *,
    grace_seconds: float,
    run_prefix: str,
    token_time: Callable[[str], float | None],
) -> list[str]:
    """Delete what no reader or writer can need any more under one partition: versions retired more
    than ``grace_seconds`` ago, and run prefixes (``<run_prefix><token>``) that are neither published,
    nor a live run's, nor retired, once their token is older than the grace period (a crashed run's
    output). Returns the deleted prefixes."""
    now = commits.clock()
    keep = referenced(state, now)
    deleted: list[str] = []
    done: list[str] = []
    retired_locations: set[str] = set()

    def delete(location: str) -> bool:
        """Delete one of the partition's run prefixes; one the delete guard refuses (the table moved, a
        damaged state item) stays where it is, logged, and the sweep goes on."""
        try:
            if not state.root:
                raise InvalidInputError(f"partition {state.key} has no root recorded")
            store.delete_prefix(
                location, table_root=commit_table_root(state.key, state.root), table=commit_partition(state.key)[0]
            )
        except (InvalidInputError, DeleteRefused) as refused:
            logger.warning("the sweep of %s leaves %s: %s", state.key, location, refused)
            return False
        deleted.append(location)
        return True

    for entry in state.retired:
        at, location = parse_retired(entry)
        location = prefix_uri(location)
        retired_locations.add(location)
        if now - at < grace_seconds:
            continue
        if location in keep or delete(location):
            done.append(entry)
    commits.forget_retired(state.key, done)
    if state.root:
        # A retired version kept for its grace period keeps its list with it (a restored state may publish it).
        kept = keep | with_manifests(location for location in retired_locations if location not in deleted)
        for prefix in store.list_child_prefixes(state.root):
            name = prefix.rstrip("/").rsplit("/", 1)[-1]
            if not name.startswith(run_prefix) or prefix_uri(prefix) in kept:
                continue
            started = token_time(name[len(run_prefix) :])
            if started is not None and now - started >= grace_seconds:
                delete(prefix)
    return deleted
