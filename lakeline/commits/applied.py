"""Which arrivals a partition's published version holds (its ``applied`` ids), kept beside the version in its
store instead of in the partition's item (#39).

The set grows with the partition's history (every file it ever loaded, every append message it applied): in
the item it passed DynamoDB's 400 KB after ~4,000 files, and every update cost a write unit per KB of it. So
does a stage B append target's ``contributions`` (a file name per file of every source partition it ever took:
1,200 hourly partitions of 4 files passed 400 KB), kept the same way (``contributions_list``).
Now each commit writes the whole set as one object, one id a line, into the run's manifest prefix
(``lakeline.storage.manifest_prefix``: outside the data, kept while the version is published, deleted with
the version by the sweep), named by its content, and the item holds only its location (``applied_list``),
swapped in the commit's compare-and-swap on the version: the list a run reads is always its version's.
An item from before keeps its ids in ``applied`` (and ``contributions``) until its next commit moves them into
the lists.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from lakeline.commits.state import PartitionState
from lakeline.errors import InvalidInputError, LakelineError
from lakeline.storage import ObjectMissing, ObjectStore, manifest_prefix

APPLIED_FOLDER = "applied/"
"""The version's lists: its applied ids, and (a stage B append target) which files each contribution wrote."""


def list_text(entries: Iterable[str], what: str = "applied id") -> str:
    """A list's text: the entries sorted, one a line."""
    ordered = sorted(set(entries))
    for entry in ordered:
        if not entry or "\n" in entry or "\r" in entry:
            raise InvalidInputError(f"{what} {entry[:200]!r} cannot be kept in a list of one entry a line")
    return "".join(f"{entry}\n" for entry in ordered)


def list_location(run_location: str, text: str) -> str:
    """Where a run writing ``run_location`` keeps the list ``text``: named by its content, so a retried commit
    writes the same object and a plan made again with other entries never replaces a list a commit named."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return f"{manifest_prefix(run_location)}{APPLIED_FOLDER}{digest}"


def write_list(store: ObjectStore, run_location: str, entries: Iterable[str], what: str = "applied id") -> str:
    """Write the list of ``entries`` for the run writing ``run_location``; its location."""
    text = list_text(entries, what)
    location = list_location(run_location, text)
    store.write_text(location, text)
    return location


def read_list(store: ObjectStore, location: str, partition: str) -> frozenset[str]:
    """The entries of the list at ``location`` (partition ``partition``'s published version's). A missing list
    is an error, never an empty set: planning as if nothing was loaded would load every file again."""
    try:
        text = store.read_text(location)
    except ObjectMissing as missing:
        raise LakelineError(
            f"{partition}: a list of what its published version holds, {location}, is missing ({missing}); "
            "nothing can be planned for the partition until it is restored"
        ) from missing
    return frozenset(line for line in text.split("\n") if line)


def _held(
    kept: frozenset[str], location: str | None, state: PartitionState, lists: ObjectStore | None
) -> frozenset[str]:
    if location is None:
        return kept
    if lists is None:
        raise InvalidInputError(f"{state.key}: reading what its published version holds needs a store")
    return kept | read_list(lists, location, state.key)


def published_ids(state: PartitionState, lists: ObjectStore | None) -> frozenset[str]:
    """Every id the partition's published version holds: its list's (read from ``lists``) and any still kept in
    the item."""
    return _held(state.applied, state.applied_list, state, lists)


def published_contributions(state: PartitionState, lists: ObjectStore | None) -> frozenset[str]:
    """The ``<contribution>|<file>`` entries of the published version of a stage B append target: its list's and
    any still kept in the item (before the lists)."""
    return _held(state.contributions, state.contributions_list, state, lists)
