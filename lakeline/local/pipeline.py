"""The event flow on one machine: an arrival runs stage A, its finished partition is routed, and the
stage B messages it produces run in turn (and route onwards), until nothing is left to run.

A queue stands in for SQS: a stage B message that fails is kept with its error, as SQS would park it in
the DLQ after its retries, and the rest of the flow goes on; so is a target that could not be routed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from lakeline.engines.base import QueryError
from lakeline.engines.spark import SparkEngine
from lakeline.errors import LakelineError
from lakeline.local.stage_a import run_local_arrival
from lakeline.local.workspace import Workspace
from stage_a.run import StageAResult
from stage_b.messages import StageBMessage
from stage_b.process import StageBOutcome, StageBServices, process_stage_b
from stage_b.routing import Unrouted, route_finished_partition


@dataclass
class FailedMessage:
    message: StageBMessage
    error: str


@dataclass
class LocalPipelineRun:
    stage_a: list[StageAResult] = field(default_factory=list)
    stage_b: list[StageBOutcome] = field(default_factory=list)
    failed: list[FailedMessage] = field(default_factory=list)
    unrouted: list[Unrouted] = field(default_factory=list)


Listener = Callable[[str, str], None]


class LocalPipeline:
    def __init__(
        self, engine: SparkEngine, workspace: Workspace, services: StageBServices, listener: Listener | None = None
    ) -> None:
        self.engine = engine
        self.workspace = workspace
        self.services = services
        self._notify = listener or (lambda _stage, _what: None)

    def process_arrival(self, key: str) -> LocalPipelineRun:
        run = LocalPipelineRun()
        self._notify("stage A", key)
        result = run_local_arrival(self.engine, self.workspace, key, self.services.settings)
        run.stage_a.append(result)
        plan = result.plan
        routing = route_finished_partition(
            f"{plan.target_database}.{plan.table}",
            plan.partition,
            self.services.dependencies,
            self.services.arrivals,
            run=plan.run_token,
        )
        self._set_aside(routing.unrouted, run)
        self.drain(routing.messages, run)
        return run

    def _set_aside(self, unrouted: list[Unrouted], run: LocalPipelineRun) -> None:
        for target in unrouted:
            run.unrouted.append(target)
            self._notify("failed", target.describe())

    def drain(self, messages: list[StageBMessage], run: LocalPipelineRun | None = None) -> LocalPipelineRun:
        run = run or LocalPipelineRun()
        queue = deque(messages)
        while queue:
            message = queue.popleft()
            self._notify("stage B", message.node)
            try:
                outcome = process_stage_b(message, self.services)
            except (LakelineError, QueryError) as error:
                run.failed.append(FailedMessage(message, str(error)))
                self._notify("failed", f"{message.node}: {error}")
                continue
            run.stage_b.append(outcome)
            self._set_aside(outcome.unrouted, run)
            queue.extend(outcome.next_messages)
        return run
