"""The stage B message (queue B): which target partition to build, and what triggered it.

Kept small on purpose: stage B reads the dependency item (steps, substitutions) itself, so a message
never carries stale SQL.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from lakeline.commits.versions import VERSION_PATTERN
from lakeline.dependencies.model import MAX_SOURCES, Usage, table_name_field
from lakeline.dependencies.resolve import check_partition, partition_path
from lakeline.errors import InvalidInputError


def _checked_partition(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise InvalidInputError("partition must be an object of column: value strings")
    return check_partition(value, "partition")


Partition = Annotated[dict[str, str], BeforeValidator(_checked_partition)]


def _checked_version(value: str | None) -> str | None:
    if value is not None and not VERSION_PATTERN.fullmatch(value):
        raise InvalidInputError(f"{value!r} is not a partition version token (v<version>.<run token>)")
    return value


class SourceArrival(BaseModel):
    """A finished partition of a table (the end of stage A, or of a stage B run)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    table: Annotated[str, table_name_field("table")]
    partition: Partition
    run: str | None = Field(
        default=None,
        description="the run that produced this version of the partition (stage A or B run token), so that a "
        "new version of the same partition is a new arrival while a redelivered message is not",
    )
    version: Annotated[str | None, AfterValidator(_checked_version)] = Field(
        default=None,
        description="that version's token (lakeline.commits.versions), for the lineage of the runs it triggers; "
        "none from a run that committed no version",
    )

    @property
    def node(self) -> str:
        """``db.table/col=value/...``: this partition as one string (path entries, arrival ids)."""
        return f"{self.table}/{partition_path(self.partition)}"


class LineageParents(BaseModel):
    """Where a run hangs in the lineage records (a tree's root, the node it builds on); in ``also_lineage``,
    also the source whose latest arrival that node is, and the partition version it published."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    root_id: str | None = None
    parent_id: str | None = None
    # defaults, so that messages queued before these fields still parse
    table: Annotated[str, table_name_field("table")] | None = None
    version: Annotated[str | None, AfterValidator(_checked_version)] = None


class StageBMessage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    target_dataset: Annotated[str, table_name_field("target_dataset")]
    partition: Partition = Field(description="the destination partition, {column: value}")
    trigger: SourceArrival
    usage: Usage
    lineage: LineageParents = LineageParents()
    path: list[str] = Field(default_factory=list, description="'dataset/col=value' nodes visited so far, oldest first")
    also_lineage: list[LineageParents] = Field(
        default_factory=list,
        max_length=MAX_SOURCES,
        description="triggerMode all: where the other sources' latest arrivals sit in the lineage records, "
        "so the run is recorded in each source's tree as well as in the completing arrival's, and the version "
        "each published (one entry per source)",
    )
    contribution: str | None = Field(
        default=None,
        description="what an append's rows stand for, which a later message with the same contribution "
        "replaces: by default the trigger's partition; 'all' for a triggerMode all target (its sources' set)",
    )

    @property
    def node(self) -> str:
        return f"{self.target_dataset}/{partition_path(self.partition)}"

    def contribution_key(self) -> str:
        """The key of the rows an append applies (``lakeline.commits`` contributions): the same for
        every version of the trigger's partition, so that a new version replaces the rows of the last."""
        contribution = self.contribution or self.trigger.node
        return uuid.uuid5(uuid.NAMESPACE_URL, f"lakeline:{contribution}->{self.node}").hex[:20]

    def deduplication_id(self) -> str:
        """Same target partition from the same arrival → same id (SQS FIFO deduplication, idempotency)."""
        run = f"@{self.trigger.run}" if self.trigger.run else ""
        return uuid.uuid5(uuid.NAMESPACE_URL, f"lakeline:{self.trigger.node}{run}->{self.node}").hex
