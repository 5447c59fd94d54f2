"""What a run's end works with (the clients and queues, made once per function by its handler) and
what it reports (``Ended``: the task's result and the line the handler logs)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import AfterValidator

from lakeline.catalog_locations import CatalogTables
from lakeline.catalog_versions import GlueTableVersions
from lakeline.lineage.records.writer import LineageWriter
from lakeline.partitions import LeasedRunEnd
from lakeline.quality.gate import QualityGate
from lakeline.run_order import FailedStep
from lakeline.storage import ObjectStore
from stage_b.onward import OnwardRouting
from stage_lineage.steps import StepEvents

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger
    from mypy_boto3_sqs import SQSClient


@dataclass(frozen=True)
class PostUpdateRuntime:
    store: ObjectStore
    runs: LeasedRunEnd
    routing: OnwardRouting
    lineage: LineageWriter
    events: StepEvents
    table_versions: GlueTableVersions | None = None
    """The Glue catalog's table versions, pruned after an unpartitioned table's publish (``None``: a catalog
    without versions, Spark's)."""


@dataclass(frozen=True)
class FailureRuntime:
    store: ObjectStore
    runs: LeasedRunEnd
    sqs: SQSClient
    dead_letter_queue_url: str
    """The stage's DLQ, where the input a failed run took is parked."""
    events: StepEvents
    """The failed run's OpenLineage events; their column lineage is read from the Glue catalog."""
    lineage: LineageWriter
    tables: CatalogTables
    """The catalog the failed run's quality table is dropped from (``drop_quality_table``)."""


Level = Literal["info", "warning", "error"]
Note = tuple[Level, str, dict[str, Any]]


@dataclass(frozen=True)
class Ended:
    """How a run ended: ``report`` is what the task returns; ``summary`` and ``details`` the line the
    handler logs at ``level``, after the ``notes`` met on the way (level, message, details)."""

    report: dict[str, Any]
    summary: str
    details: dict[str, Any]
    level: Level = "info"
    notes: list[tuple[Level, str, dict[str, Any]]] = field(default_factory=list)

    def reported(self, logger: Logger) -> dict[str, Any]:
        """The report, once the notes and the summary are logged."""
        for level, message, details in [*self.notes, (self.level, self.summary, self.details)]:
            getattr(logger, level)(message, extra=details)
        return self.report


def prune_table_versions(
    versions: GlueTableVersions | None, table: str, partition: dict[str, str], *, wrote: bool
) -> list[Note]:
    """After a run published an unpartitioned ``table`` (``db.table``; a new Glue table version), its old versions are
    pruned (``lakeline.catalog_versions``). Housekeeping: a failure loses nothing and the next publish prunes again,
    so it is noted, not raised (raising would park the input of a run already published)."""
    if versions is None or partition or not wrote:
        return []
    database, _, name = table.partition(".")
    try:
        deleted = versions.prune(database, name)
    except (BotoCoreError, ClientError) as error:
        return [("warning", "old Glue table versions not pruned", {"table": table, "error": str(error)})]
    return [("info", "old Glue table versions pruned", {"table": table, "versions": deleted})] if deleted else []


def drop_quality_table(gate: QualityGate | None, tables: CatalogTables) -> list[Note]:
    """After a failed run, its quality step's table (named by the plan), which the step drops in its own ``finally``
    unless it is killed there: a Lambda timeout or out of memory, a Glue job stopped at its timeout, a crash.
    Idempotent (a redelivered failure finds it gone). Housekeeping, as ``prune_table_versions``: a failure is noted
    with the table to drop, not raised (raising would leave the run's input unparked)."""
    if gate is None:
        return []
    table = f"{gate.database}.{gate.quality_table}"
    try:
        tables.drop_table(gate.database, gate.quality_table)
    except Exception as error:  # any catalog's: the table is named, to drop by hand
        return [("warning", "quality table not dropped; drop it by hand", {"table": table, "error": str(error)})]
    return [("info", "quality table dropped (if the step left it)", {"table": table})]


def unrouted_note(reason: str) -> tuple[Level, str, dict[str, Any]]:
    """A target the routing onwards could not reach (its message is parked in queue B's DLQ)."""
    return ("error", "target not routed; parked in queue B's DLQ", {"reason": reason})


def steps_of(stage: str, steps: Iterable[FailedStep]) -> AfterValidator:
    """A failure model's check that its ``failed_step`` is one of ``stage``'s ``steps``."""
    allowed = frozenset(steps)

    def check(step: FailedStep) -> FailedStep:
        if step not in allowed:
            raise ValueError(f"{step!r} is not a step of {stage} (one of {sorted(allowed)})")
        return step

    return AfterValidator(check)
