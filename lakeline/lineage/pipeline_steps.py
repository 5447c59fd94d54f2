"""The lineage records stage A and stage B write, one tree per arrival.

    raw file (RAW_DATA_INPUT) → stage partition (STAGE_A_COMPLETE) → target partition (STAGE_B_COMPLETE) → ...

The root id is fixed by the arrival (its raw key and stage A run token), and node ids are deterministic,
so a redelivered step writes the same nodes. Stage B messages carry the root and the node they build
on (``LineageParents``), which is how a chain of stage B runs stays in the arrival's tree.
"""

from __future__ import annotations

import uuid

from lakeline.lineage.writer import LineageWriter
from stage_a.plan import StageAPlan
from stage_b.messages import LineageParents, StageBMessage
from stage_b.plan import StageBPlan

RAW_DATA_INPUT = "RAW_DATA_INPUT"
STAGE_A_COMPLETE = "STAGE_A_COMPLETE"
STAGE_B_COMPLETE = "STAGE_B_COMPLETE"
STEP_FAILED = "STEP_FAILED"
ROOT_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "lakeline:lineage-root")


def stage_a_root_id(plan: StageAPlan) -> str:
    return str(uuid.uuid5(ROOT_NAMESPACE, f"{plan.raw_key}@{plan.run_token}"))


def raw_object_location(plan: StageAPlan) -> str:
    return plan.raw_partition_location.rstrip("/") + "/" + plan.raw_key.rsplit("/", 1)[-1]


def record_stage_a(writer: LineageWriter, plan: StageAPlan, *, run_id: str | None = None) -> LineageParents:
    root = stage_a_root_id(plan)
    (raw,) = writer.step(
        root_id=root,
        parent_id=root,
        action_taken=RAW_DATA_INPUT,
        storage_locations=[raw_object_location(plan)],
        dataset=f"{plan.source_database}.{plan.table}",
    )
    (done,) = writer.step(
        root_id=root,
        parent_id=raw.node_id,
        action_taken=STAGE_A_COMPLETE,
        storage_locations=[plan.target_location],
        run_id=run_id,
        job_name="lakeline/stage_a",
        dataset=f"{plan.target_database}.{plan.table}",
    )
    return LineageParents(root_id=root, parent_id=done.node_id)


def _parents(message: StageBMessage) -> tuple[str, str]:
    root = message.lineage.root_id or str(uuid.uuid5(ROOT_NAMESPACE, message.deduplication_id()))
    return root, message.lineage.parent_id or root


def record_stage_b(
    writer: LineageWriter, plan: StageBPlan, message: StageBMessage, *, run_id: str | None = None
) -> LineageParents:
    root, parent = _parents(message)
    (done,) = writer.step(
        root_id=root,
        parent_id=parent,
        action_taken=STAGE_B_COMPLETE,
        storage_locations=[plan.target_location],
        run_id=run_id,
        job_name=f"lakeline/stage_b.{plan.dataset}",
        dataset=plan.dataset,
    )
    return LineageParents(root_id=root, parent_id=done.node_id)


def record_stage_b_failure(writer: LineageWriter, plan: StageBPlan, message: StageBMessage) -> None:
    """A failed run is a terminal node of the tree, so the archive shows where the chain stopped."""
    root, parent = _parents(message)
    writer.step(
        root_id=root,
        parent_id=parent,
        action_taken=STEP_FAILED,
        storage_locations=[plan.target_location],
        job_name=f"lakeline/stage_b.{plan.dataset}",
        dataset=plan.dataset,
    )
