"""A partition's versions as the archived lineage records them: which run wrote each, from which versions of
which inputs, from which raw files (``lakeline lineage show --table --partition``).

A run's output node carries its version token (``lakeline.commits.versions``) and its dataset; its location is
the run's prefix, ``<table location>/<col=value/...>/lakeline_run=<token>/``, which names the partition. The
node's parent is what the run read: the input version that triggered it (stage B), or the raw file (stage A).
A run is recorded once in the tree of each arrival it took, so a version may have several nodes: their parents
together are its inputs, and the tops of their trees its raw files. The same answer, over the archive table,
is ``athena_queries/lineage/partition_version.sql``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from lakeline.commits.versions import VERSION_PATTERN, VersionRef, version_number
from lakeline.lineage.records.archive import PARTITION_COLUMN, ArchiveStore, parse_archive
from lakeline.lineage.records.model import RAW_DATA_INPUT
from lakeline.lineage.records.tree import LineageNode
from lakeline.storage import RUN_PREFIX


class VersionNotFound(LookupError):
    """The archive holds no such partition (``partition_missing``) or version: the message says which."""

    def __init__(self, message: str, *, partition_missing: bool) -> None:
        super().__init__(message)
        self.partition_missing = partition_missing


@dataclass(frozen=True)
class VersionInput:
    """What a version's run read: a dataset at a version (``None``: not a partition version) and location."""

    dataset: str | None
    version: str | None
    location: str


@dataclass
class PartitionVersion:
    token: str
    number: int
    dataset: str
    location: str
    run_id: str | None
    job_name: str | None
    recorded_at: int
    inputs: list[VersionInput] = field(default_factory=list)
    raw_files: list[str] = field(default_factory=list)
    roots: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "version": self.token,
            "number": self.number,
            "dataset": self.dataset,
            "location": self.location,
            "run_id": self.run_id,
            "job_name": self.job_name,
            "recorded_at": self.recorded_at,
            "inputs": [vars(item) for item in self.inputs],
            "raw_files": self.raw_files,
            "roots": self.roots,
        }


@dataclass(frozen=True)
class VersionAnswer:
    """One version of a partition, with the versions before and after it (``None``: there is none archived)."""

    table: str
    partition: str
    version: PartitionVersion
    before: PartitionVersion | None
    after: PartitionVersion | None
    known: tuple[str, ...]  # every archived version's token, oldest first

    def to_dict(self) -> dict[str, object]:
        return {
            "table": self.table,
            "partition": self.partition,
            "version": self.version.to_dict(),
            "before": self.before.to_dict() if self.before else None,
            "after": self.after.to_dict() if self.after else None,
            "versions": list(self.known),
        }


def in_partition(location: str, partition: str) -> bool:
    """Whether a run's output ``location`` is a version of ``partition`` (``col=value/...``)."""
    return f"/{partition}/{RUN_PREFIX}" in location


def partition_versions(nodes: Iterable[LineageNode], table: str, partition: str) -> list[PartitionVersion]:
    """Every archived version of ``table``'s ``partition``, oldest first. ``nodes``: the archive's, each once
    (by node id); a version whose token is not of Lakeline's form is left out."""
    by_id: dict[str, LineageNode] = {}
    versions: dict[str, PartitionVersion] = {}
    ours: list[LineageNode] = []
    for node in nodes:
        by_id[node.node_id] = node
        if (
            node.dataset == table
            and node.version
            and in_partition(node.storage_location, partition)
            and VERSION_PATTERN.fullmatch(node.version)
        ):
            ours.append(node)
    for node in sorted(ours, key=lambda n: (n.recorded_at, n.node_id)):
        version = versions.get(node.version or "")
        if version is None:
            token = node.version or ""
            version = versions[token] = PartitionVersion(
                token,
                version_number(token),
                table,
                node.storage_location,
                node.run_id,
                node.job_name,
                node.recorded_at,
            )
        _add_origin(version, node, by_id)
    return sorted(versions.values(), key=lambda v: (v.number, v.recorded_at))


def _add_origin(version: PartitionVersion, node: LineageNode, by_id: dict[str, LineageNode]) -> None:
    """The node's parent (what the run read) and the top of its tree (the raw file the chain started from)."""
    if node.root_id not in version.roots:
        version.roots.append(node.root_id)
    parent = by_id.get(node.parent_id)
    if parent is not None and parent.action_taken != RAW_DATA_INPUT:
        read = VersionInput(parent.dataset, parent.version, parent.storage_location)
        if read not in version.inputs:
            version.inputs.append(read)
    top, seen = parent, {node.node_id}
    while top is not None and top.parent_id in by_id and top.node_id not in seen:  # a cycle stops the walk
        seen.add(top.node_id)
        top = by_id[top.parent_id]
    if top is not None and top.action_taken == RAW_DATA_INPUT and top.storage_location not in version.raw_files:
        version.raw_files.append(top.storage_location)


def answer(versions: list[PartitionVersion], table: str, partition: str, wanted: VersionRef | None) -> VersionAnswer:
    """The ``wanted`` version (default: the newest, the published one) with its neighbours; ``VersionNotFound``
    if there is none such."""
    if not versions:
        raise VersionNotFound(f"{table} partition {partition} has no archived versions", partition_missing=True)
    known = tuple(v.token for v in versions)
    if wanted is None:
        index = len(versions) - 1
    else:
        matching = [i for i, v in enumerate(versions) if wanted.matches(v.token)]
        if not matching:
            raise VersionNotFound(
                f"{table} partition {partition} has no archived version {_named(wanted)}; it has {', '.join(known)}",
                partition_missing=False,
            )
        index = matching[-1]
    return VersionAnswer(
        table,
        partition,
        versions[index],
        versions[index - 1] if index > 0 else None,
        versions[index + 1] if index + 1 < len(versions) else None,
        known,
    )


def _named(wanted: VersionRef) -> str:
    return f"v{wanted.number}" + (f".{wanted.run_token}" if wanted.run_token else "")


def archived_partitions(nodes: Iterable[LineageNode], table: str) -> list[str]:
    """The partitions of ``table`` with archived versions (``col=value/...``), for an error that lists them."""
    found: set[str] = set()
    for node in nodes:
        if node.dataset == table and node.version and f"/{RUN_PREFIX}" in node.storage_location:
            path = node.storage_location.split(f"/{RUN_PREFIX}", 1)[0].split("/")
            found.add("/".join(part for part in path if "=" in part))
    return sorted(found)


def archive_nodes(store: ArchiveStore, table: str | None = None) -> list[LineageNode]:
    """Every node of the archive, each once: a root traced again on a later date wins (keys sort by date).
    With ``table``, only the lines that name it: a line is a whole path, top to leaf, so it holds a version's
    node together with what the run read and the raw file its tree starts from; the rest is not parsed."""
    needle = f'"{table}"'.encode() if table else None
    nodes: dict[str, LineageNode] = {}
    for key in store.keys(f"{PARTITION_COLUMN}="):
        body = store.get(key)
        if body is None or (needle is not None and needle not in body):
            continue
        where = key
        if needle is not None:
            body = b"\n".join(line for line in body.splitlines() if needle in line)
            where = f"{key} (its lines naming {table})"
        for line in parse_archive(body, where=where):
            for node in line.nodes():
                nodes[node.node_id] = node
    return list(nodes.values())
