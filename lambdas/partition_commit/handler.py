"""State machine task between a run's SQL and its catalog swap (both stages): make the run's prefix
the partition's next version in the pipeline-state table (``lakeline.commits``).

It carries the published version's files into the prefix for an incremental append (for a stage B
append, all but those of the contribution the run replaces), then commits with
a compare-and-swap on the version held by the run's lease. A run whose lease was lost (it expired and
another run took the partition) fails here, before it could move the partition: ``LeaseLost``.

A stage A plan names its batch (``lakeline.commits.batch``): the entries its commit takes out of ``pending``
and the ids it records as applied are read from there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict

from lakeline.aws.clients import AwsClients
from lakeline.commits import Lease, PartitionCommits, PartitionState
from lakeline.commits.batch import BatchRef, read_batch
from lakeline.errors import InvalidInputError, validated
from lakeline.lambda_support import load_environment
from lakeline.partitions import commit_write
from lakeline.storage import ObjectStore, SchemeObjectStore
from lambdas.environments import CommitEnvironment
from lambdas.observability import observability
from stage_end.quality import read_report

logger, tracer, metrics = observability("partition-commit")


class LeasedPlan(BaseModel):
    """The fields of a stage A or stage B plan the commit reads."""

    model_config = ConfigDict(extra="ignore")

    lease: dict[str, Any]
    target_location: str
    applied: list[str]
    batch: BatchRef | None = None  # stage A: where its lease's pending entries and its applied ids are
    carry_from: str | None = None
    contribution: str | None = None  # stage B append: whose rows the run wrote
    replaces: list[str] = []  # stage B append: the published files of that contribution, not carried
    quality: dict[str, Any] | None = None  # the run's checks (#41): its quality step's report is beside the run


class CommitInput(BaseModel):
    plan: LeasedPlan
    execution_id: str = ""


@dataclass(frozen=True)
class Runtime:
    commits: PartitionCommits
    store: SchemeObjectStore


@cache
def runtime() -> Runtime:
    aws = AwsClients()
    environment = load_environment(CommitEnvironment, os.environ)
    store = SchemeObjectStore(aws.s3)
    return Runtime(PartitionCommits(aws.dynamodb, environment.pipeline_state_table, lists=store), store)


def commit_plan(plan: LeasedPlan, commits: PartitionCommits, store: ObjectStore) -> tuple[Lease, PartitionState]:
    """Commit the run of ``plan``: its lease, and the partition's state after."""
    lease = Lease.from_dict(plan.lease)
    if lease.location != plan.target_location:
        raise InvalidInputError(f"the plan writes {plan.target_location} but its lease is for {lease.location}")
    applied = plan.applied
    if plan.batch is not None:
        # Exactly the entries the plan took leave ``pending``; a retry reads the same object (named by its content).
        batch = read_batch(store, plan.batch, plan.target_location)
        lease, applied = replace(lease, pending=batch.pending), list(batch.applied)
    state = commit_write(
        commits,
        lease,
        store,
        carry_from=plan.carry_from,
        applied=applied,
        contribution=plan.contribution,
        replaces=plan.replaces,
        checked=_checked(plan, store),
    )
    return lease, state


def _checked(plan: LeasedPlan, store: ObjectStore) -> str | None:
    """The summary of the checks the run passed, kept in the partition's item as its last checked version's; the
    report is there when the plan has checks (the quality step ran before the commit)."""
    if plan.quality is None:
        return None
    report = read_report(store, plan.target_location)
    return None if report is None else report.summary


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = validated(CommitInput, event, "commit input")
    run = runtime()
    lease, state = commit_plan(request.plan, run.commits, run.store)
    metrics.add_metric(name="PartitionCommits", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name="CommittedFiles", unit=MetricUnit.Count, value=state.files)
    logger.info(
        "partition committed",
        extra={"partition": lease.key, "version": state.version, "location": state.published, "files": state.files},
    )
    return {"partition": lease.key, "version": state.version, "location": state.published, "files": state.files}
