"""One stage B message end to end, on any engine: plan, run, record, route onwards.

Order matters for redelivery: the run is published, then (for ``append``) recorded as applied, then
routed. A redelivered message whose append was already applied is not run again, but it is routed
again with the run that applied it, so a chain interrupted before its next message was sent goes on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from lakeline.commits import Lease
from lakeline.dependencies.arrivals import ArrivalTracker
from lakeline.dependencies.model import DependencyEdge, DependencyItem, InvalidEdge
from lakeline.dependencies.resolve import team_sql_reader
from lakeline.engines.base import Engine
from lakeline.partitions import new_run_token
from lakeline.settings import PipelineSettings
from lakeline.storage import ObjectStore
from stage_b.ledger import AppliedMessages
from stage_b.messages import LineageParents, StageBMessage
from stage_b.plan import PlanSources, StageBPlan, plan_message
from stage_b.routing import Unrouted, route_finished_partition
from stage_b.run import StageBResult, run_stage_b


class DependencySource(Protocol):
    def get_item(self, dataset: str) -> DependencyItem | None: ...

    def edges_from(self, source_table: str) -> Sequence[DependencyEdge | InvalidEdge]: ...


@dataclass
class StageBServices:
    engine: Engine
    store: ObjectStore
    settings: PipelineSettings
    dependencies: DependencySource
    ledger: AppliedMessages
    queries_root: Path
    arrivals: ArrivalTracker | None = None


@dataclass
class StageBOutcome:
    message: StageBMessage
    run_token: str
    plan: StageBPlan | None = None
    result: StageBResult | None = None
    skipped: bool = False
    next_messages: list[StageBMessage] = field(default_factory=list)
    unrouted: list[Unrouted] = field(default_factory=list)


def plan_local_message(
    message: StageBMessage, services: StageBServices, run_token: str, *, lease: Lease | None = None
) -> StageBPlan:
    """``stage_b.plan.plan_message`` from the local services (step SQL files from the queries folder)."""
    sources = PlanSources(
        services.dependencies,
        services.engine,
        services.settings,
        lambda team: team_sql_reader(services.queries_root, team),
    )
    return plan_message(message, sources, run_token, lease)


def process_stage_b(
    message: StageBMessage,
    services: StageBServices,
    *,
    run_token: str | None = None,
    lineage: LineageParents | None = None,
) -> StageBOutcome:
    message_id = message.deduplication_id()
    applied = services.ledger.applied_run(message_id) if message.usage == "append" else None
    if applied is not None:
        outcome = StageBOutcome(message, applied, skipped=True)
    else:
        token = run_token or new_run_token()
        plan = plan_local_message(message, services, token)
        result = run_stage_b(plan, services.engine, services.store)
        if message.usage == "append":
            services.ledger.mark_applied(message_id, token)
        outcome = StageBOutcome(message, token, plan, result)
    routing = route_finished_partition(
        message.target_dataset,
        message.partition,
        services.dependencies,
        services.arrivals,
        lineage=lineage,
        path=message.path,
        run=outcome.run_token,
    )
    outcome.next_messages, outcome.unrouted = routing.messages, routing.unrouted
    return outcome
