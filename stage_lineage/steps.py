"""OpenLineage events of finished stage runs, as the post-update and failure functions send them.

A stage's state machine ends in its post-update function (the run succeeded) or its failure function
(a step failed). That function replays the execution's life cycle (``run_lifecycle``): the root's and
the execution's START (dated when the run was planned), each step's START and COMPLETE, or for a failed
run the steps before the failed one COMPLETE, that one FAIL, the later ones ABORT (a failure whose step
is not known gets the execution's FAIL and no step events), then the execution's and root's end. The
steps are dated with their queries' times when the state machine kept them (stage B on Athena: every
step of a run that succeeded, the failed step of one that failed, ``stage_b.failures``); a step without
times is dated when the one before it ended (the run's planning time for the first):

- always into the event archive (``OPENLINEAGE_EVENTS_LOCATION``, the archive bucket's ``openlineage/``
  folder, next to the lineage records), which is the default and writes nothing elsewhere;
- and through an openlineage-python transport when one is configured the standard way
  (``OPENLINEAGE_URL`` / ``OPENLINEAGE_API_KEY``, ``OPENLINEAGE__TRANSPORT__*``, ``openlineage.yml``).

A transport that fails is logged and counted by the emitter; the archive write is not optional: if it
fails the function fails and its (idempotent) invocation is retried, so no run loses its events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from openlineage.client.event_v2 import RunEvent
from pydantic import BaseModel

from lakeline.lambda_support import load_environment
from lakeline.lineage.columns.sql import TableDescriber
from lakeline.lineage.openlineage.archive import EventArchive
from lakeline.lineage.openlineage.config import OpenLineageSettings, RunReference, load_openlineage_settings
from lakeline.lineage.openlineage.emitter import LineageEmitter
from lakeline.lineage.openlineage.events import event_to_dict, now
from lakeline.lineage.openlineage.run_lifecycle import ExecutionLifecycle
from lakeline.lineage.records.archive import S3ArchiveStore
from lakeline.quality.evaluate import QualityReport
from lakeline.run_order import AFTER_PUBLISH, FailedStep
from stage_a.plan import StageAPlan
from stage_b.messages import StageBMessage
from stage_b.plan import StageBPlan
from stage_lineage.events import (
    run_started_at,
    stage_a_lifecycle,
    stage_a_run,
    stage_b_lifecycle,
    stage_b_run,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

Outcome = Literal["COMPLETE", "FAIL"]


class StepEventsEnvironment(BaseModel):
    """The function's settings. Without a location no events are made: that is the local flow, which
    emits its own events from the Spark run as it happens (``lakeline.runtimes.embedded.event_flow``)."""

    openlineage_events_location: str | None = None
    pipeline_engine: Literal["athena", "spark"] = "athena"
    pipeline_engine_version: str | None = None
    """What the engine really is (the Glue job's Spark, Athena's engine version): this function runs neither."""


@dataclass
class StepEvents:
    settings: OpenLineageSettings
    emitter: LineageEmitter
    archive: EventArchive | None
    engine: str
    catalog: TableDescriber
    """Where the steps' tables are described, for column lineage (the Glue catalog)."""
    engine_version: str | None = None

    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str], *, s3: S3Client, catalog: TableDescriber, cwd: Path, home: Path
    ) -> StepEvents:
        own = load_environment(StepEventsEnvironment, environ)
        settings = load_openlineage_settings(environ, cwd=cwd, home=home)
        location = own.openlineage_events_location
        archive = EventArchive(S3ArchiveStore.at(s3, location)) if location else None
        return cls(
            settings, LineageEmitter(settings), archive, own.pipeline_engine, catalog, own.pipeline_engine_version
        )

    @classmethod
    def in_lambda(cls, environ: Mapping[str, str], *, s3: S3Client, catalog: TableDescriber) -> StepEvents:
        """From a function's environment; ``openlineage.yml`` may ship in the code folder (the working directory)."""
        home = Path(environ.get("HOME") or Path.cwd())
        return cls.from_environment(environ, s3=s3, catalog=catalog, cwd=Path.cwd(), home=home)

    @property
    def enabled(self) -> bool:
        return self.archive is not None

    def stage_a_execution(self, plan: StageAPlan) -> RunReference:
        """The execution's run, which the lineage records name (events or not: the local flow makes its own)."""
        return stage_a_run(plan, self.settings).execution

    def stage_b_execution(self, plan: StageBPlan, message: StageBMessage) -> RunReference:
        return stage_b_run(plan, message, self.settings).execution

    def publish(self, events: Sequence[RunEvent]) -> list[dict[str, Any]]:
        """Emit ``events``; keep them in the archive; return them."""
        for event in events:
            self.emitter.emit(event)
        parts = self.emitter.drain_parts()
        emitted = [event_to_dict(part.event) for part in parts]
        if self.archive is not None:
            self.archive.put(emitted, [part.archive_name for part in parts])
        return emitted

    def _facts(self, report: QualityReport | None) -> dict[str, Any]:
        """What a stage's life cycle is made from besides its plan: the catalog, the settings, the engine, the
        checks' report."""
        return {
            "catalog": self.catalog,
            "settings": self.settings,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "report": report,
        }

    def _replay(
        self,
        lifecycle: ExecutionLifecycle,
        run_token: str,
        outcome: Outcome,
        error: str | None,
        failed_step: int | None,
        step_times: Sequence[tuple[datetime, datetime] | None] | None = None,
        after_steps: bool = False,
        checks_failed: bool = False,
    ) -> list[dict[str, Any]]:
        events = lifecycle.replay(
            started_at=run_started_at(run_token),
            ended_at=now(),
            failed_step=failed_step,
            error=(error or "failed") if outcome == "FAIL" else None,
            step_times=step_times,
            after_steps=after_steps,
            checks_failed=checks_failed,
        )
        return self.publish(events)

    def stage_a(
        self,
        plan: StageAPlan,
        outcome: Outcome,
        *,
        error: str | None = None,
        failed: FailedStep = "ctas",
        report: QualityReport | None = None,
    ) -> list[dict[str, Any]]:
        """``failed``: the failure function's ``failed_step``: the one step (the CTAS, or the Spark job) failed;
        after it (the checks, the commit, the publish); or before it (register, reconcile: no step events).
        ``report``: what the run's checks found (``stage_end.quality``), for the checks' run."""
        if not self.enabled:
            return []
        lifecycle = stage_a_lifecycle(plan, **self._facts(report))
        in_step = outcome == "FAIL" and failed in ("ctas", "spark")
        after = outcome == "FAIL" and failed in AFTER_PUBLISH
        step = 0 if in_step else None
        checks_failed = outcome == "FAIL" and failed == "quality"
        return self._replay(
            lifecycle, plan.run_token, outcome, error, step, after_steps=after, checks_failed=checks_failed
        )

    def stage_b(
        self,
        plan: StageBPlan,
        message: StageBMessage,
        outcome: Outcome,
        *,
        error: str | None = None,
        failed_step: int | None = None,
        step_times: Sequence[tuple[datetime, datetime] | None] | None = None,
        failed: FailedStep = "steps",
        report: QualityReport | None = None,
    ) -> list[dict[str, Any]]:
        """``failed_step``: the index of the step that failed, when the caller knows it; ``step_times``:
        each step's (start, end), None where not known (``stage_b.failures``); ``failed``: the failure
        function's ``failed_step`` (after the steps: the checks, the commit, the publish); ``report``: what the
        run's checks found, for the checks' run."""
        if not self.enabled:
            return []
        lifecycle = stage_b_lifecycle(plan, message, **self._facts(report))
        after = outcome == "FAIL" and failed in AFTER_PUBLISH
        if outcome == "FAIL" and failed == "steps" and failed_step is None and len(lifecycle.steps) == 1:
            failed_step = 0  # a run of one step failed in it
        if step_times is not None and len(step_times) > len(lifecycle.steps):
            step_times = None  # more times than steps: the replay dates them itself rather than misdate one
        checks_failed = outcome == "FAIL" and failed == "quality"
        return self._replay(
            lifecycle, plan.run_token, outcome, error, failed_step, step_times, after, checks_failed=checks_failed
        )
