"""Every function's environment, as the model its handler reads it into (``load_environment``).

One module, free of Powertools, so that the stacks build each function's variables from the same models
(``stacks.contracts.handler_environment``): a variable's name is its field's alias, else the field's name in
upper case. ``tests/infrastructure/test_contracts.py`` checks every function sets what its model requires.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from lakeline.lambda_support import RouterEnvironment, SettleEnvironment
from lakeline.lineage.records.archive import DEFAULT_TRACE_ACTION
from lakeline.lineage.records.model import DEFAULT_TERMINAL_ACTIONS
from lakeline.lineage.records.trace import TraceSettings
from stage_b.onward import RoutingEnvironment


class StageARouterEnvironment(RouterEnvironment):
    raw_bucket: str
    stage_a_queue_url: str  # its own queue: records it has no time left for go back there
    stage_a_follow_up_queue_url: str  # a follow-up run that finds no free slot waits there
    # A follow-up whose partition's arrivals still come waits again (stage_a.start.follow_up_wait): as long as the
    # run-end functions' window (SettleEnvironment), which the stacks leave at its default on both.
    follow_up_window_seconds: int = Field(default=30, ge=0, le=900)


class StageBRouterEnvironment(RouterEnvironment):
    dependencies_table: str
    artifacts_bucket: str
    stage_b_queue_url: str  # its own queue: a message whose partition is full waits there
    stage_b_follow_up_queue_url: str  # a follow-up run that finds no free slot waits there


class CommitEnvironment(BaseModel):
    pipeline_state_table: str


class QualityEnvironment(BaseModel):
    athena_workgroup: str  # its result location and encryption are the workgroup's (enforced)


class PostUpdateEnvironment(RoutingEnvironment, SettleEnvironment):
    """Routing onwards (queue B, the dependency tables) and ending the run's lease."""


class StageAPostUpdateEnvironment(PostUpdateEnvironment):
    stage_a_follow_up_queue_url: str


class StageBPostUpdateEnvironment(PostUpdateEnvironment):
    stage_b_follow_up_queue_url: str


class FailureEnvironment(SettleEnvironment):
    """Ending a failed run's lease, and its lineage records (a published run's, after a failed post-update)."""

    lineage_queue_url: str


class StageAFailureEnvironment(FailureEnvironment):
    stage_a_follow_up_queue_url: str
    stage_a_dead_letter_queue_url: str


class StageBFailureEnvironment(FailureEnvironment):
    stage_b_follow_up_queue_url: str
    dead_letter_queue_url: str


class StrandedRunEnvironment(FailureEnvironment):
    """Ending the run of an execution that ended outside its Catch, of either stage (``lambdas/stranded_run``)."""

    stage_a_state_machine_arn: str
    stage_b_state_machine_arn: str
    stage_a_follow_up_queue_url: str
    stage_a_dead_letter_queue_url: str
    stage_b_follow_up_queue_url: str
    stage_b_dead_letter_queue_url: str


class StrandedSweepEnvironment(BaseModel):
    """The scheduled sweep of stranded partitions (``lambdas/stranded_sweep``)."""

    pipeline_state_table: str
    stage_a_follow_up_queue_url: str
    stage_b_follow_up_queue_url: str
    max_items: int = Field(default=2_000, ge=1)
    max_starts: int = Field(default=50, ge=1)


class DependenciesStreamEnvironment(BaseModel):
    dependencies_table: str = Field(alias="DEPENDENCIES_TABLE", min_length=1)
    by_table_table: str = Field(alias="DEPENDENCIES_BY_TABLE_TABLE", min_length=1)
    # The mapping's on-failure queue: an item that can never be applied is parked there by the function, with why.
    failure_queue_url: str = Field(alias="DEPENDENCIES_STREAM_DEAD_LETTER_QUEUE_URL", min_length=1)


class LineageInputEnvironment(BaseModel):
    queue_url: str = Field(alias="LINEAGE_QUEUE_URL", min_length=1)
    ttl_hours: float = Field(default=24.0, alias="LINEAGE_TTL_HOURS", gt=0)


class LineageLoadEnvironment(BaseModel):
    table_name: str = Field(alias="LINEAGE_TABLE_NAME", min_length=1)
    dead_letter_queue_url: str = Field(alias="LINEAGE_DEAD_LETTER_QUEUE_URL", min_length=1)
    write_attempts: int = Field(default=8, alias="LINEAGE_WRITE_ATTEMPTS", ge=1)


class LineageScheduleEnvironment(BaseModel):
    table_name: str = Field(alias="LINEAGE_TABLE_NAME", min_length=1)
    trace_queue_url: str = Field(alias="TRACE_QUEUE_URL", min_length=1)
    settle_seconds: int = Field(default=120, alias="TRACE_SETTLE_SECONDS", ge=0)
    first_run_lookback_hours: int = Field(default=48, alias="TRACE_FIRST_RUN_LOOKBACK_HOURS", ge=1)


class LineageTraceEnvironment(BaseModel):
    table_name: str = Field(alias="LINEAGE_TABLE_NAME", min_length=1)
    archive_bucket: str = Field(alias="ARCHIVE_BUCKET", min_length=1)
    archive_prefix: str = Field(default="", alias="ARCHIVE_PREFIX")
    terminal_actions: str = Field(default=",".join(sorted(DEFAULT_TERMINAL_ACTIONS)), alias="TERMINAL_ACTIONS")
    trace_action: str = Field(default=DEFAULT_TRACE_ACTION, alias="TRACE_ACTION")

    def settings(self) -> TraceSettings:
        actions = frozenset(action.strip() for action in self.terminal_actions.split(",") if action.strip())
        return TraceSettings(terminal_actions=actions, trace_action=self.trace_action)


class LineageCompactEnvironment(BaseModel):
    archive_bucket: str = Field(alias="ARCHIVE_BUCKET", min_length=1)
    archive_prefix: str = Field(default="", alias="ARCHIVE_PREFIX")


class LineageExpiredEnvironment(BaseModel):
    table_name: str = Field(alias="LINEAGE_TABLE_NAME", min_length=1)
    archive_bucket: str = Field(alias="ARCHIVE_BUCKET", min_length=1)
    archive_prefix: str = Field(default="", alias="ARCHIVE_PREFIX")
    margin_seconds: int = Field(default=120, alias="EXPIRY_MARGIN_SECONDS", ge=0)
    trace_action: str = Field(default=DEFAULT_TRACE_ACTION, alias="TRACE_ACTION")
