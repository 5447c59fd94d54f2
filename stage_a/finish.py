"""Finishing a stage A run: after its commit (``lakeline.partitions.commit_write``, under a lease),
point the catalog at the run's prefix (``publish_stage_a``); after a failure, delete what it wrote
(``abandon_stage_a``). Older versions go in the post-update's grace-period sweep, never at once.

The deployed post-update and failure functions and the local runtime finish a run with these."""

from __future__ import annotations

from lakeline.engines.base import Engine
from lakeline.partitions import delete_run_files, run_statements
from lakeline.storage import ObjectStore, manifest_prefix
from stage_a.plan import StageAPlan


def publish_stage_a(plan: StageAPlan, engine: Engine) -> list[str]:
    """Point the stage partition at the run's prefix (after its commit, under a lease)."""
    return run_statements(engine, plan.publish, plan.target_database) if plan.writes else []


def abandon_stage_a(plan: StageAPlan, store: ObjectStore) -> tuple[int, str]:
    """After a failed CTAS: delete whatever it wrote into its fresh prefix; the stage partition is untouched.
    How many objects were deleted, and why they could not be (``delete_run_files``), else empty."""
    deleted, left = delete_run_files(store, plan.target_location, plan.table_root, plan.stage_table)
    if left:  # its files stay (published, says the catalog): so does its list of what the version holds
        return deleted, left
    if plan.lease is not None:
        # A leased run's manifests hold its batch, which its failure path reads to end the run; that path deletes
        # them once it has (``lakeline.partitions.abandon_run``).
        return deleted, left
    # Its manifests too (the run's CTAS has ended: nothing reads them any more).
    manifests, unmade = delete_run_files(
        store, manifest_prefix(plan.target_location), plan.table_root, plan.stage_table
    )
    return deleted + manifests, unmade
