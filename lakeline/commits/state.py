"""What the protocol reads back: a partition's state, a run's lease on it, and what finishing a run left.

Items are read with boto3's ``TypeDeserializer``: numbers come back as ``Decimal`` and string sets as sets,
which the readers below turn into the types the dataclasses declare.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from lakeline.aws.dynamodb import item_values
from lakeline.commits.keys import contribution_files
from lakeline.errors import LakelineError


class LeaseLost(LakelineError):
    """The run's lease expired and another run took the partition: this run must not publish."""


class PartitionFull(LakelineError):
    """As many arrivals wait behind the partition's run as its item may hold: this one is not recorded, and waits
    in its queue instead (sent back by the router, with a delay)."""


def _number(values: Mapping[str, Any], name: str, default: float = 0) -> float:
    value = values.get(name)
    return float(value) if isinstance(value, Decimal) else default


def _text(values: Mapping[str, Any], name: str) -> str | None:
    value = values.get(name)
    return value if isinstance(value, str) else None


def _strings(values: Mapping[str, Any], name: str) -> frozenset[str]:
    return frozenset(str(value) for value in values.get(name) or ())


def _pair(value: Any) -> tuple[str, str] | None:
    return (str(value[0]), str(value[1])) if value else None


@dataclass(frozen=True)
class TakenBatch:
    """The batch a run took out of ``pending`` when it was planned (#39): its entries are in its batch object
    (``lakeline.commits.batch``), not in the partition's item, so the next batch fills behind the run while it
    works. Its commit (or its failure path) ends it; a run that takes the lease from one that ended without either
    adopts it (``PartitionCommits.take``)."""

    owner: str  # the run that took it
    location: str  # its batch object
    run: str  # that run's prefix (the object is under its manifest prefix, kept while the batch is taken)
    count: int

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> TakenBatch | None:
        owner, location, run = (_text(values, name) for name in ("taken_owner", "taken_batch", "taken_run"))
        if owner is None or location is None or run is None:
            return None
        return cls(owner, location, run, int(_number(values, "taken_count")))

    def to_dict(self) -> dict[str, Any]:
        return {"owner": self.owner, "location": self.location, "run": self.run, "count": self.count}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> TakenBatch | None:
        if not data:
            return None
        return cls(str(data["owner"]), str(data["location"]), str(data["run"]), int(data["count"]))


@dataclass(frozen=True)
class PartitionState:
    key: str
    version: int = 0
    published: str | None = None
    files: int = 0
    lease_owner: str | None = None
    lease_location: str | None = None
    lease_expires: float = 0.0
    pending: frozenset[str] = frozenset()
    pending_bytes: int = 0  # what ``pending`` holds, counted as arrivals are added and taken
    applied: frozenset[str] = frozenset()  # ids kept in the item (before ``applied_list``; moved at a commit)
    applied_list: str | None = None  # where the published version's applied ids are (``lakeline.commits.applied``)
    retired: frozenset[str] = frozenset()
    root: str | None = None
    contributions: frozenset[str] = frozenset()  # ``key|file`` kept in the item (before ``contributions_list``)
    contributions_list: str | None = None  # where the published version's ``key|file`` entries are
    contributed: int | None = None  # how many of the published version's files a contribution owns
    last_waiting: float = 0.0
    """When the newest arrival waiting in ``pending`` was recorded (the router's clock, epoch seconds; 0: none yet)."""
    taken: TakenBatch | None = None  # the batch a run took out of ``pending`` (stage A), until its run ends

    @property
    def waiting(self) -> bool:
        """Arrivals wait for a run: in ``pending``, or in a batch taken that no run has ended."""
        return bool(self.pending) or self.taken is not None

    @property
    def contributed_files(self) -> int:
        """How many of the published version's files a stage B append contribution owns."""
        return len(self.contributions) if self.contributed is None else self.contributed

    def leased(self, now: float) -> bool:
        return self.lease_owner is not None and self.lease_expires >= now

    @classmethod
    def from_item(cls, key: str, item: Mapping[str, Any]) -> PartitionState:
        """The state held by the partition's item (an empty item: a partition never written)."""
        values = item_values(item)
        return cls(
            key=key,
            version=int(_number(values, "version")),
            published=_text(values, "published"),
            files=int(_number(values, "files")),
            lease_owner=_text(values, "lease_owner"),
            lease_location=_text(values, "lease_location"),
            lease_expires=_number(values, "lease_expires"),
            pending=_strings(values, "pending"),
            pending_bytes=int(_number(values, "pending_bytes")),
            applied=_strings(values, "applied"),
            applied_list=_text(values, "applied_list"),
            retired=_strings(values, "retired"),
            root=_text(values, "root"),
            contributions=_strings(values, "contributions"),
            contributions_list=_text(values, "contributions_list"),
            contributed=int(_number(values, "contributed")) if "contributed" in values else None,
            last_waiting=_number(values, "last_waiting"),
            taken=TakenBatch.from_values(values),
        )


@dataclass(frozen=True)
class Lease:
    """A run's right to write one partition, and the partition's state when the run took it."""

    key: str
    owner: str
    location: str  # the run's own prefix
    version: int
    published: str | None  # the published prefix, None before the first publish
    files: int
    pending: tuple[str, ...]  # the arrivals this run takes, sorted
    applied: frozenset[str]
    """Every id the published version holds, when the lease was taken or resumed (``PartitionCommits.begin``
    and ``resume`` read its list); empty in a lease passed on (``to_dict``) or handed over (``finish``)."""
    seq: int
    catalog_version: int = 0  # the version the catalog is known to point at (0: unknown)
    contributions: frozenset[str] = frozenset()
    """``key|file`` of the published version (stage B append), when the lease was taken or resumed (read from
    its list as ``applied`` is); passed on in no lease."""
    routed: str | None = None  # the published prefix whose post-update routed it onwards (``mark_routed``)
    published_lineage: tuple[str, str] | None = None
    """(root id, node id) of the published version's run in the lineage records (``mark_lineage``)."""
    applied_list: str | None = None  # the location of the published version's applied ids
    last_waiting: float = 0.0
    """When the newest of ``pending`` was recorded behind the lease's run (``PartitionState.last_waiting``); only a
    lease read from the item has it (a follow-up's, at its run's end): passed on in no lease."""
    taken: TakenBatch | None = None
    """The batch taken out of ``pending`` for this lease's run (its plan's), or for an earlier run that ended
    without ending it (this run adopts it): its commit ends it instead of taking entries out of ``pending``."""

    @property
    def waiting(self) -> bool:
        """Arrivals wait for the lease's run: in ``pending``, or in a batch taken (``PartitionState.waiting``)."""
        return bool(self.pending) or self.taken is not None

    @property
    def takes_own_batch(self) -> bool:
        return self.taken is not None and self.taken.owner == self.owner

    def contribution_files(self, key: str) -> tuple[str, ...]:
        """The published version's files that hold contribution ``key``'s rows (sorted)."""
        return contribution_files(self.contributions, key)

    @property
    def catalog_behind(self) -> bool:
        """The committed version is not known to be the catalog's (a crash between commit and swap)."""
        return self.published is not None and self.catalog_version != self.version

    @classmethod
    def from_item(cls, key: str, owner: str, location: str, item: Mapping[str, Any]) -> Lease:
        """Run ``owner``'s lease (writing ``location``) as the partition's item holds it."""
        state = PartitionState.from_item(key, item)
        values = item_values(item)
        noted = values.get("published_lineage")
        return cls(
            key=key,
            owner=owner,
            location=location,
            version=state.version,
            published=state.published,
            files=state.files,
            pending=tuple(sorted(state.pending)),
            applied=state.applied,
            seq=int(_number(values, "lease_seq")),
            catalog_version=int(_number(values, "catalog_version")),
            contributions=state.contributions,
            routed=_text(values, "routed"),
            published_lineage=(str(noted["root_id"]), str(noted["node_id"])) if noted else None,
            applied_list=state.applied_list,
            last_waiting=state.last_waiting,
            taken=state.taken,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "owner": self.owner,
            "location": self.location,
            "version": self.version,
            "published": self.published,
            "files": self.files,
            "pending": list(self.pending),
            # ``applied`` stays behind: it only decides the plan, and it grows with the partition (a
            # state machine's input is limited to 256 KiB).
            "seq": self.seq,
            "catalog_version": self.catalog_version,
            "routed": self.routed,
            "published_lineage": list(self.published_lineage) if self.published_lineage else None,
            "applied_list": self.applied_list,
            "taken": self.taken.to_dict() if self.taken else None,
            # ``contributions`` stays behind with ``applied``: the plan passes on the files it replaces.
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Lease:
        return cls(
            key=str(data["key"]),
            owner=str(data["owner"]),
            location=str(data["location"]),
            version=int(data["version"]),
            published=data.get("published"),
            files=int(data.get("files", 0)),
            pending=tuple(data.get("pending", ())),
            applied=frozenset(data.get("applied", ())),
            seq=int(data.get("seq", 0)),
            catalog_version=int(data.get("catalog_version", 0)),
            routed=data.get("routed"),
            published_lineage=_pair(data.get("published_lineage")),
            applied_list=data.get("applied_list"),
            taken=TakenBatch.from_dict(data.get("taken")),
        )


@dataclass(frozen=True)
class Finished:
    """What ``finish`` left: the follow-up run's lease (``None``: the lease is released, or another run
    has it), and the partition's state right after, which the sweep works from without reading it again."""

    follow_up: Lease | None
    state: PartitionState


def previous_owner(item: Mapping[str, Any]) -> str | None:
    """The run that handed the partition's lease on (``finish``), as the item notes it."""
    return _text(item_values(item), "lease_previous")
