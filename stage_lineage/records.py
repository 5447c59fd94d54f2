"""The lineage records stage A and stage B write, one tree per arrival.

    raw file (RAW_DATA_INPUT) → stage partition (STAGE_A_COMPLETE) → target partition (STAGE_B_COMPLETE) → ...

A run whose version its quality checks blocked (#41) ends its trees in a ``DQ_CHECK_FAIL`` node (the seed's action
for a failed data quality check) on the table it would have written: stage A's under each raw file it took, stage
B's where a failed run's ``STEP_FAILED`` goes. Its run (the execution) is the parent of the checks' OpenLineage run,
whose events carry each rule's result.

The root id is fixed by the arrival (its raw key and stage A run token), and node ids are deterministic,
so a redelivered step writes the same nodes. Stage B messages carry the root and the node they build
on (``LineageParents``), which is how a chain of stage B runs stays in the arrival's tree.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from lakeline.commits import Lease
from lakeline.commits.versions import planned_version
from lakeline.lineage.records.model import DQ_CHECK_FAIL, RAW_DATA_INPUT, deterministic_node_id
from lakeline.lineage.records.writer import LineageWriter
from stage_a.plan import StageAPlan, arrival_id
from stage_b.messages import LineageParents, StageBMessage
from stage_b.plan import StageBPlan, leased_messages

if TYPE_CHECKING:
    from lakeline.lineage.openlineage.config import RunReference

STAGE_A_COMPLETE = "STAGE_A_COMPLETE"
STAGE_B_COMPLETE = "STAGE_B_COMPLETE"
STEP_FAILED = "STEP_FAILED"
ROOT_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "lakeline:lineage-root")


def raw_root_id(raw_key: str, run_token: str) -> str:
    """The root of the tree of a raw file taken by a run."""
    return str(uuid.uuid5(ROOT_NAMESPACE, f"{raw_key}@{run_token}"))


def stage_a_root_id(plan: StageAPlan) -> str:
    return raw_root_id(plan.raw_key, plan.run_token)


def raw_object_location(plan: StageAPlan, raw_key: str | None = None) -> str:
    return plan.raw_partition_location.rstrip("/") + "/" + (raw_key or plan.raw_key).rsplit("/", 1)[-1]


def taken_raw_keys(plan: StageAPlan) -> list[str]:
    """The raw files whose rows the run adds: its own arrival's, then (under a lease) every other new
    arrival it took, e.g. the files that came while the partition's last run was in flight."""
    keys = [plan.raw_key]
    applied = set(plan.applied)
    for arrival in plan.arrivals:
        if arrival_id(arrival.key, arrival.sequencer) in applied and arrival.key not in keys:
            keys.append(arrival.key)
    return keys


def _run_fields(execution: RunReference | None, default_job: str) -> dict[str, str | None]:
    """The OpenLineage run a record belongs to: the execution whose events carry it as their parent."""
    if execution is None:
        return {"run_id": None, "job_name": default_job}
    return {"run_id": execution.run_id, "job_name": f"{execution.namespace}/{execution.name}"}


def run_version(plan: StageAPlan | StageBPlan) -> str | None:
    """The token of the partition version the run commits (``None``: it commits none)."""
    return planned_version(plan.lease, plan.run_token, writes=plan.writes)


def stage_a_parents(plan: StageAPlan) -> LineageParents:
    """Where ``record_stage_a`` puts the run in the lineage records (its root, its STAGE_A_COMPLETE node),
    known before anything is written: the node ids are deterministic (``deterministic_node_id``)."""
    root = stage_a_root_id(plan)
    raw = deterministic_node_id(root, root, RAW_DATA_INPUT, raw_object_location(plan))
    return LineageParents(
        root_id=root, parent_id=deterministic_node_id(root, raw, STAGE_A_COMPLETE, plan.target_location)
    )


def stage_b_parents(plan: StageBPlan, message: StageBMessage) -> LineageParents:
    """Where ``record_stage_b`` puts the run in the lineage records, known before anything is written."""
    root, parent = stage_b_lineage_ids(message)
    return LineageParents(
        root_id=root, parent_id=deterministic_node_id(root, parent, STAGE_B_COMPLETE, plan.target_location)
    )


def record_stage_a(
    writer: LineageWriter, plan: StageAPlan, *, execution: RunReference | None = None, blocked: bool = False
) -> LineageParents:
    """A tree per raw file the run took (``taken_raw_keys``), each reaching the version the run wrote;
    the first is the run's own, under which the stage B runs it triggers are recorded. ``blocked``: its checks
    refused the version, which each tree ends at instead (``DQ_CHECK_FAIL``, no version: none was published)."""
    trees = []
    action, version = (DQ_CHECK_FAIL, None) if blocked else (STAGE_A_COMPLETE, run_version(plan))
    for key in taken_raw_keys(plan):
        root = raw_root_id(key, plan.run_token)
        (raw,) = writer.step(
            root_id=root,
            parent_id=root,
            action_taken=RAW_DATA_INPUT,
            storage_locations=[raw_object_location(plan, key)],
            dataset=f"{plan.source_database}.{plan.table}",
        )
        (done,) = writer.step(
            root_id=root,
            parent_id=raw.node_id,
            action_taken=action,
            storage_locations=[plan.target_location],
            **_run_fields(execution, "lakeline/stage_a"),
            dataset=f"{plan.target_database}.{plan.table}",
            version=version,
        )
        trees.append(LineageParents(root_id=root, parent_id=done.node_id))
    return trees[0]


def stage_b_lineage_ids(message: StageBMessage) -> tuple[str, str]:
    """The root and parent node a stage B run's lineage hangs under (its own root if it was not triggered)."""
    root = message.lineage.root_id or str(uuid.uuid5(ROOT_NAMESPACE, message.deduplication_id()))
    return root, message.lineage.parent_id or root


def taken_messages(plan: StageBPlan, message: StageBMessage) -> list[StageBMessage]:
    """The messages the run took: ``message`` first, then the others of a leased run (every message waiting
    when a coalesced or follow-up run was planned)."""
    if plan.lease is None:
        return [message]
    ids = set(plan.message_ids) - {message.deduplication_id()}
    return [message, *(m for m in leased_messages(Lease.from_dict(plan.lease)) if m.deduplication_id() in ids)]


def _trees(plan: StageBPlan, message: StageBMessage, *, sources: bool) -> list[tuple[str, str]]:
    """Every (root, parent) the run is recorded under, ``message``'s own first, each once: the tree of each
    message the run took (its arrival's) and, with ``sources``, each other source's tree of a triggerMode
    all target (which the run read as well)."""
    trees: dict[tuple[str, str], None] = {}  # in order, each once
    for taken in taken_messages(plan, message):
        trees[stage_b_lineage_ids(taken)] = None
        if sources:
            trees.update(
                ((other.root_id, other.parent_id), None)
                for other in taken.also_lineage
                if other.root_id and other.parent_id
            )
    return list(trees)


def _record_stage_b_step(
    writer: LineageWriter,
    plan: StageBPlan,
    trees: list[tuple[str, str]],
    action: str,
    execution: RunReference | None,
) -> list[str]:
    """One ``action`` node per tree, for the run's target version; the node ids, in the trees' order."""
    run = _run_fields(execution, f"lakeline/stage_b.{plan.dataset}")
    version = run_version(plan) if action == STAGE_B_COMPLETE else None  # a failed run made no version
    nodes = []
    for root, parent in trees:
        (node,) = writer.step(
            root_id=root,
            parent_id=parent,
            action_taken=action,
            storage_locations=[plan.target_location],
            **run,
            dataset=plan.dataset,
            version=version,
        )
        nodes.append(node.node_id)
    return nodes


def record_stage_b(
    writer: LineageWriter, plan: StageBPlan, message: StageBMessage, *, execution: RunReference | None = None
) -> LineageParents:
    """The run in the tree of every arrival it took and every source it read (the records are a tree per
    arrival, one parent per node, so tracing any of them reaches it); ``message``'s own node is returned,
    under which the runs it triggers are recorded."""
    trees = _trees(plan, message, sources=True)
    own, *_ = _record_stage_b_step(writer, plan, trees, STAGE_B_COMPLETE, execution)
    return LineageParents(root_id=trees[0][0], parent_id=own)


def record_stage_b_failure(
    writer: LineageWriter,
    plan: StageBPlan,
    message: StageBMessage,
    *,
    execution: RunReference | None = None,
    blocked: bool = False,
) -> None:
    """A failed run is a terminal node of the tree of each arrival it took, so the archive shows where each
    chain stopped: ``DQ_CHECK_FAIL`` when its checks ``blocked`` its version, ``STEP_FAILED`` otherwise."""
    action = DQ_CHECK_FAIL if blocked else STEP_FAILED
    _record_stage_b_step(writer, plan, _trees(plan, message, sources=False), action, execution)
