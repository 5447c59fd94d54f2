"""Archives of partition versions as the stages record them, for the version query's test and benchmark.

Each history is one partition of an ``orders`` stage table and of a ``daily`` target built from it: every
arrival (a raw file) is a tree, raw file → stage A run (``orders`` version n) → stage B run (``daily`` version
n), staged by the trace's own code (``archive_tree``) and folded into the day's archive objects by the
compaction (``compact_day``), as the nightly trace and the compaction leave them; or, with ``per_root``, one
object per root in the day folder, as the trace wrote them before the compaction. ``legacy`` renders the
versions out of the lines, as lines archived before #43 were written.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lakeline.commits.versions import version_token
from lakeline.lineage.records.archive import LocalArchiveStore, archive_body, trace_object_key
from lakeline.lineage.records.compact import compact_day
from lakeline.lineage.records.model import deterministic_node_id
from lakeline.lineage.records.trace import archive_tree
from lakeline.lineage.records.tree import LineageNode, build_tree

ORDERS, DAILY = "sales.orders", "analytics.daily"
START = datetime(2026, 11, 1, tzinfo=UTC)
TRACED = datetime(2026, 11, 28, 1, 0, tzinfo=UTC)


def run_token(partition: int, version: int) -> str:
    moment = START + timedelta(days=partition % 20, seconds=version)
    return f"{moment:%Y%m%d}t{moment:%H%M%S%f}_{(partition * 1000 + version) % 16**10:010x}"


def partition_of(partition: int) -> str:
    return f"date={20220000 + partition}"


def arrival_nodes(partition: int, version: int, *, chain: int = 1) -> list[LineageNode]:
    """One arrival's tree: the raw file, then the stage A run and ``chain`` stage B runs (each a version)."""
    root = f"root-{partition}-{version}"
    at = int((START + timedelta(seconds=partition * 100 + version)).timestamp())
    raw_location = f"s3://raw/sales/orders/{partition_of(partition)}/file-{version}.csv"
    raw = LineageNode(
        root,
        deterministic_node_id(root, root, "RAW_DATA_INPUT", raw_location),
        root,
        "RAW_DATA_INPUT",
        raw_location,
        at,
    )
    nodes, parent = [raw], raw.node_id
    for step, (dataset, action) in enumerate([(ORDERS, "STAGE_A_COMPLETE")] + [(DAILY, "STAGE_B_COMPLETE")] * chain):
        token = run_token(partition, version * 10 + step)
        table = dataset.replace(".", "/")
        location = f"s3://stage/{table}/{partition_of(partition)}/lakeline_run={token}/"
        if step > 1:  # further stage B runs of the chain: each its own target
            location = location.replace("/daily/", f"/daily{step}/")
            dataset = f"{dataset}{step}"
        node_id = deterministic_node_id(root, parent, action, location)
        nodes.append(
            LineageNode(
                root,
                node_id,
                parent,
                action,
                location,
                at + step,
                None,
                None,
                f"lakeline/{action.lower()}",
                dataset,
                version_token(version, token),
            )
        )
        parent = node_id
    return nodes


def write_history(
    store: LocalArchiveStore, partitions: int, versions: int, *, chain: int = 1, legacy: int = 0, per_root: bool = False
) -> int:
    """``versions`` arrivals for each of ``partitions`` partitions; the first ``legacy`` partitions without
    versions. Returns how many nodes were archived."""
    count = 0
    for partition in range(partitions):
        for version in range(1, versions + 1):
            nodes = arrival_nodes(partition, version, chain=chain)
            if partition < legacy:
                nodes = [node._replace(version=None) for node in nodes]
            tree = build_tree(nodes[0].root_id, nodes)
            if per_root:
                key = trace_object_key(TRACED.date(), tree.root_id)
                body = archive_body(tree, location=store.location(key), action="DATA_COMPACTION", archived_at=TRACED)
                store.put(key, body)
            else:
                archive_tree(tree, store, TRACED.date(), archived_at=TRACED, action="DATA_COMPACTION")
            count += len(nodes)
    if not per_root:
        compact_day(store, TRACED.date())
    return count
