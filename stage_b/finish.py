"""Finishing a stage B run: after its commit (``lakeline.partitions.commit_write``, under a lease),
point the catalog at the run's prefix (``publish_stage_b``); after a failure, delete what it wrote
(``abandon_stage_b``). Older versions go in the post-update's grace-period sweep, never at once.

The deployed post-update and failure functions and the local runtime finish a run with these."""

from __future__ import annotations

from lakeline.engines.base import Engine
from lakeline.partitions import delete_run_files, run_statements
from lakeline.storage import ObjectStore
from stage_b.plan import StageBPlan


def publish_stage_b(plan: StageBPlan, engine: Engine) -> list[str]:
    """Point the target partition at the run's prefix (after its commit, under a lease)."""
    return run_statements(engine, plan.publish, plan.target_database)


def abandon_stage_b(plan: StageBPlan, store: ObjectStore) -> tuple[int, str]:
    """After a failed step: delete what the run wrote into its fresh prefix."""
    if not plan.writes:
        return 0, ""
    return delete_run_files(store, plan.target_location, plan.table_root, plan.dataset)
