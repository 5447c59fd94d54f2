"""What planning a stage B message needs from the runtime that runs it on one machine: its engine, its
object store, the dependency items and the folder of step SQL files (``plan_local_message``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from lakeline.commits import Lease
from lakeline.dependencies.model import DependencyEdge, DependencyItem, InvalidEdge
from lakeline.dependencies.resolve import team_sql_reader
from lakeline.engines.base import Engine
from lakeline.settings import PipelineSettings
from lakeline.storage import ObjectStore
from stage_b.messages import StageBMessage
from stage_b.plan import PlanSources, StageBPlan, plan_message


class DependencySource(Protocol):
    def get_item(self, dataset: str) -> DependencyItem | None: ...

    def edges_from(self, source_table: str) -> Sequence[DependencyEdge | InvalidEdge]: ...


@dataclass
class StageBServices:
    engine: Engine
    store: ObjectStore
    settings: PipelineSettings
    dependencies: DependencySource
    queries_root: Path


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
