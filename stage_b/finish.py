"""Finishing a stage B run: after its commit (``lakeline.partitions.commit_write``, under a lease),
point the catalog at the run's prefix (``publish_stage_b``) and, for a run without a lease, delete the
older prefixes (``finish_stage_b``); after a failure, delete what it wrote (``abandon_stage_b``).

The deployed post-update and failure functions and the local runtime finish a run with these."""

from __future__ import annotations

from lakeline.engines.base import Engine
from lakeline.partitions import delete_run_files, delete_superseded, run_statements
from lakeline.storage import ObjectStore
from stage_b.plan import StageBPlan


def publish_stage_b(plan: StageBPlan, engine: Engine) -> list[str]:
    """Point the target partition at the run's prefix (after its commit, under a lease)."""
    return run_statements(engine, plan.publish, plan.target_database)


def finish_stage_b(plan: StageBPlan, store: ObjectStore) -> tuple[list[str], list[str]]:
    """After the swap: (current data files, deleted prefixes). Only a run without a lease (a single
    writer) deletes the older run prefixes at once; leased runs leave that to the grace-period sweep."""
    if not plan.writes:
        return [], []
    superseded = (
        delete_superseded(store, plan.partition_root, plan.run_token, table_root=plan.table_root, table=plan.dataset)
        if plan.lease is None
        else []
    )
    return store.list_data_files(plan.target_location), superseded


def abandon_stage_b(plan: StageBPlan, store: ObjectStore) -> tuple[int, str]:
    """After a failed step: delete what the run wrote into its fresh prefix."""
    if not plan.writes:
        return 0, ""
    return delete_run_files(store, plan.target_location, plan.table_root, plan.dataset)
