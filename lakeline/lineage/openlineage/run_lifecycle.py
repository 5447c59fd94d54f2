"""The OpenLineage life cycle of one stage execution: its root run, its parent run and its steps.

    root    job ``pipeline`` (the arrival)     START ............................. COMPLETE | FAIL
    parent  job ``stage_b.<db>.<table>``         START ......................... COMPLETE | FAIL
    step 0  ``....step0``                          START ... COMPLETE
    step 1  ``....step1``                                     START ... FAIL
    step 2  ``....step2``                                                ABORT  (it never ran)
    checks  ``....quality``  the quality checks, after the steps, when the run has them (#41)

Every event is made when what it reports happens: a runner calls ``started`` before the first step,
``step_started`` / ``step_finished`` around each step, and ``finished`` at the end (which aborts the
steps that never started). A function that only learns the outcome afterwards (a state machine's
post-update or failure function) calls ``replay`` with what it knows: which step failed, and the
steps' times when it has them.

The root's events belong to the execution that starts the tree (stage A for an arrival, or a stage B
run nothing triggered); an execution inside an existing tree, or under a root an orchestrator
configured (``OPENLINEAGE_PARENT_ID``), reports only its own runs and its steps. The root's COMPLETE
says the run that opened it ended; runs triggered later in the tree still name it as their root.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from openlineage.client.event_v2 import RunEvent, RunState

from lakeline.lineage.openlineage.config import RunReference
from lakeline.lineage.openlineage.events import StepRun, now, run_event


class StepState(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    DONE = "done"


@dataclass
class ExecutionLifecycle:
    """The events of one execution; ``steps`` come from ``stage_lineage.events`` (``stage_b_steps``)."""

    steps: Sequence[StepRun]
    execution: RunReference
    root: RunReference
    emits_root: bool
    dataset_namespace: str
    engine: str | None = None
    engine_version: str | None = None
    checks: StepRun | None = None
    """The run of the quality checks on the new version (a child of the execution, after the steps; #41), when the
    run has checks; its end event carries their results on the checked dataset."""
    states: list[StepState] = field(init=False)
    checks_state: StepState = field(init=False)

    def __post_init__(self) -> None:
        self.states = [StepState.WAITING] * len(self.steps)
        self.checks_state = StepState.WAITING

    def _run(self, run: RunReference, parent: RunReference | None) -> StepRun:
        return StepRun(
            job_name=run.name,
            run_id=run.run_id,
            job_namespace=run.namespace,
            dataset_namespace=self.dataset_namespace,
            parent=parent,
            engine=self.engine,
            engine_version=self.engine_version,
        )

    def _outer(self, state: RunState, at: datetime, error: str | None) -> list[RunEvent]:
        """Events of the parent (and the root, when this execution owns it), innermost last on START."""
        runs = [self._run(self.execution, self.root)]
        if self.emits_root:
            runs.insert(0, self._run(self.root, None))
        if state is not RunState.START:
            runs.reverse()  # the parent ends before the root
        return [run_event(run, state, at=at, error=error) for run in runs]

    def started(self, at: datetime | None = None) -> list[RunEvent]:
        return self._outer(RunState.START, at or now(), None)

    def step_started(self, index: int, at: datetime | None = None) -> RunEvent:
        if self.states[index] is not StepState.WAITING:
            raise ValueError(f"step {index} of {self.execution.name} has already started")
        self.states[index] = StepState.RUNNING
        return run_event(self.steps[index], RunState.START, at=at or now())

    def step_finished(self, index: int, at: datetime | None = None, *, error: str | None = None) -> RunEvent:
        """COMPLETE, or FAIL with ``error``."""
        if self.states[index] is not StepState.RUNNING:
            raise ValueError(f"step {index} of {self.execution.name} is not running")
        self.states[index] = StepState.DONE
        state = RunState.FAIL if error is not None else RunState.COMPLETE
        return run_event(self.steps[index], state, at=at or now(), error=error)

    def checks_ran(self, started_at: datetime, ended_at: datetime, *, error: str | None = None) -> list[RunEvent]:
        """The quality run's START and its COMPLETE, or FAIL with ``error`` (a ``block`` rule failed, or the checks
        could not run); none without checks."""
        if self.checks is None:
            return []
        if self.checks_state is not StepState.WAITING:
            raise ValueError(f"the checks of {self.execution.name} have already run")
        self.checks_state = StepState.DONE
        state = RunState.FAIL if error is not None else RunState.COMPLETE
        return [
            run_event(self.checks, RunState.START, at=started_at),
            run_event(self.checks, state, at=ended_at, error=error),
        ]

    def finished(self, at: datetime | None = None, *, error: str | None = None) -> list[RunEvent]:
        """ABORT for the steps (and checks) that never started (or are still running), then the parent's and
        root's end."""
        at = at or now()
        events = []
        for index, state in enumerate(self.states):
            if state is not StepState.DONE:
                self.states[index] = StepState.DONE
                events.append(run_event(self.steps[index], RunState.ABORT, at=at))
        if self.checks is not None and self.checks_state is not StepState.DONE:
            self.checks_state = StepState.DONE
            events.append(run_event(self.checks, RunState.ABORT, at=at))
        return events + self._outer(RunState.FAIL if error is not None else RunState.COMPLETE, at, error)

    def replay(
        self,
        *,
        started_at: datetime,
        ended_at: datetime,
        failed_step: int | None = None,
        error: str | None = None,
        step_times: Sequence[tuple[datetime, datetime] | None] | None = None,
        after_steps: bool = False,
        checks_failed: bool = False,
    ) -> list[RunEvent]:
        """The whole life cycle after the fact, in order.

        Success (``error`` is None): every step ran. Failure: the steps before ``failed_step`` completed,
        it failed, the ones after it never ran; ``after_steps``: every step completed and what came after
        them failed (the commit, the publish). A failure whose step is unknown reports the parent's
        FAIL and no step events, rather than claiming a step failed that may have completed.
        ``step_times``: each step's (start, end), or None for a step whose times are not known (also
        past the sequence's end); such a step is dated when the step before it ended (the run's start
        for the first), so that the events' times keep the order the steps ran in. The checks (if any) ran after
        every step of a run that succeeded or failed after its steps: they passed, unless ``checks_failed`` (what
        failed was the quality step itself).
        """
        if failed_step is not None and not 0 <= failed_step < len(self.steps):
            raise ValueError(f"{self.execution.name} has no step {failed_step}")
        events = self.started(started_at)
        if after_steps:
            failed_step = None
        ran = len(self.steps) if error is None or after_steps else (failed_step + 1 if failed_step is not None else 0)
        end = started_at
        for index in range(ran):
            known = step_times[index] if step_times is not None and index < len(step_times) else None
            begin, end = known or (end, end)
            events.append(self.step_started(index, begin))
            failing = error is not None and index == failed_step
            events.append(self.step_finished(index, end, error=error if failing else None))
        if error is None or after_steps:
            events += self.checks_ran(end, end, error=error if checks_failed else None)
        if error is not None and failed_step is None and not after_steps:
            self.states = [StepState.DONE] * len(self.steps)  # unknown: no step events at all
            self.checks_state = StepState.DONE
        return events + self.finished(ended_at, error=error)
