"""What both stages' run ends share: the run whose routing onwards a post-update sends, the notes kept
with the version a run published (routed; where it sits in the lineage records) and the end of its lease."""

from __future__ import annotations

from typing import Any

from lakeline.commits import Lease, PartitionCommits
from lakeline.commits.versions import planned_version, published_version
from lakeline.partitions import LeasedRunEnd
from lakeline.storage import RUN_PREFIX, RUN_TOKEN_PATTERN
from stage_b.messages import LineageParents


def onward_run(run_token: str, wrote: bool, lease: dict[str, Any] | None) -> str | None:
    """The run whose routing onwards a post-update sends: its own if it took anything new (``wrote``).
    A run that took nothing new (a redelivery, or a redrive of input parked after its run's post-update
    failed) sends again the routing of the run that published the version its lease found, under that
    run's ids, unless that run's post-update noted it routed it (``mark_routed``): what that run did not
    send goes now, and a repeat of what it sent is recognised by the targets' runs. ``None``: nothing
    published, or nothing left to route."""
    if wrote:
        return run_token
    published = (lease or {}).get("published")
    if not published or (lease or {}).get("routed") == published:
        return None
    name = str(published).rstrip("/").rsplit("/", 1)[-1]
    token = name.removeprefix(RUN_PREFIX)
    return token if name.startswith(RUN_PREFIX) and RUN_TOKEN_PATTERN.fullmatch(token) else None


def onward_version(run_token: str, routed_run: str, lease: dict[str, Any] | None, *, wrote: bool) -> str | None:
    """The token of the version a post-update routes onwards (``onward_run``): the one its run committed, or the
    one its lease found published (``routed_run``'s)."""
    if routed_run == run_token:
        return planned_version(lease, run_token, writes=wrote)
    return published_version(lease, routed_run)


def note_routed(commits: PartitionCommits, lease: dict[str, Any] | None, location: str, *, wrote: bool) -> None:
    """After a leased run's routing onwards went out: the version it routed (its own, or the one its lease
    found published) is noted as routed (``onward_run``)."""
    if lease is None:
        return
    published = location if wrote else lease.get("published")
    if published:
        commits.mark_routed(str(lease["key"]), str(published))


def note_lineage(
    commits: PartitionCommits, lease: dict[str, Any] | None, location: str, parents: LineageParents
) -> None:
    """Before a run that published routes onwards: where it sits in the lineage records, kept with the version
    it published (``PartitionCommits.mark_lineage``), for a run that routes that version again later."""
    if lease is not None and parents.root_id and parents.parent_id:
        commits.mark_lineage(str(lease["key"]), location, parents.root_id, parents.parent_id)


def published_parents(lease: dict[str, Any] | None) -> LineageParents | None:
    """Where the run that published the version the lease found sits in the lineage records (noted by
    ``note_lineage``): the parents of the targets' runs when a run that took nothing new routes it again."""
    noted = Lease.from_dict(lease).published_lineage if lease else None
    return LineageParents(root_id=noted[0], parent_id=noted[1]) if noted else None


def end_lease(
    runs: LeasedRunEnd, lease: dict[str, Any] | None, root: str, *, wrote: bool
) -> tuple[list[str], Lease | None]:
    """End a run's lease (released, or handed to a follow-up run, which is queued): what the grace-period
    sweep deleted, and the follow-up's lease. A plan without a lease (never the pipeline's) ends nothing."""
    if lease is None:
        return [], None
    settled = runs.after_publish(lease, wrote=wrote, root=root)
    return settled.swept, settled.follow_up
