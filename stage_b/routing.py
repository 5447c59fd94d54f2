"""Routing: after a table's partition is finished, which targets run next, at which partition.

1. One Query on dependencies-by-table by the finished table (no scans) lists its targets, each pair
   carrying what is needed to map the partition (validated on read).
2. Every target's destination partition is computed first, so an invalid pair fails the routing before
   anything is written.
3. Trigger mode ``any`` (the seed's behaviour): every arrival produces a stage B message. Mode ``all``:
   the arrival is recorded for the target partition and a message is produced only by the arrival that
   completes the set of sources (see lakeline.dependencies.arrivals). Recording is idempotent, so a
   failed routing can simply be retried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from lakeline.dependencies.arrivals import ArrivalTracker
from lakeline.dependencies.model import DependencyEdge
from lakeline.dependencies.resolve import destination_partition, partition_path
from lakeline.errors import ConfigError, ValidationError
from stage_b.messages import LineageParents, SourceArrival, StageBMessage


class EdgeSource(Protocol):
    def edges_from(self, source_table: str) -> list[DependencyEdge]: ...


class RoutingError(ValidationError):
    """Some targets of a finished partition could not be routed; ``problems`` names each one."""

    def __init__(self, arrival: SourceArrival, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(f"routing {arrival.node} failed:\n" + "\n".join(f"  - {problem}" for problem in problems))


@dataclass(frozen=True)
class PlannedRoute:
    edge: DependencyEdge
    partition: dict[str, str]

    @property
    def node(self) -> str:
        return f"{self.edge.target_dataset}/{partition_path(self.partition)}"


def plan_routes(
    arrival: SourceArrival, edges: Sequence[DependencyEdge], path: Sequence[str] = ()
) -> list[PlannedRoute]:
    """Destination partitions for every target; every problem is collected, then raised together."""
    routes: list[PlannedRoute] = []
    problems: list[str] = []
    for edge in sorted(edges, key=lambda edge: edge.target_dataset):
        try:
            partition = destination_partition(
                edge.dependency, edge.partition_column, edge.partition_python_mask, arrival.partition
            )
        except ValidationError as error:
            problems.append(f"{edge.target_dataset}: {error}")
            continue
        route = PlannedRoute(edge, partition)
        if route.node in path or route.node == arrival.node:
            problems.append(f"{edge.target_dataset}: {route.node} was already built in this chain (a loop)")
            continue
        routes.append(route)
    if problems:
        raise RoutingError(arrival, problems)
    return routes


def route_finished_partition(
    finished_table: str,
    partition: Mapping[str, str],
    edges: EdgeSource,
    arrivals: ArrivalTracker | None = None,
    lineage: LineageParents | None = None,
    path: Sequence[str] = (),
    run: str | None = None,
) -> list[StageBMessage]:
    """The stage B messages a finished partition produces (none if it triggers nothing).

    ``path`` is the chain of nodes built before this one (from the stage B message being finished);
    ``arrivals`` is required only when a target uses trigger mode ``all``; ``run`` identifies the run
    that produced this version of the partition.
    """
    arrival = SourceArrival(table=finished_table, partition=dict(partition), run=run)
    routes = plan_routes(arrival, edges.edges_from(arrival.table), path)
    if arrivals is None and any(route.edge.trigger_mode == "all" for route in routes):
        raise ConfigError("a target uses triggerMode 'all' but no pipeline-state table was configured")
    chain = [*path, arrival.node]
    messages: list[StageBMessage] = []
    for route in routes:
        if route.edge.trigger_mode == "all" and arrivals is not None:
            decision = arrivals.record_arrival(route.node, arrival.table, arrival.node, route.edge.sources)
            if not decision.triggers:
                continue
        messages.append(
            StageBMessage(
                target_dataset=route.edge.target_dataset,
                partition=route.partition,
                trigger=arrival,
                usage=route.edge.dependency.usage,
                lineage=lineage or LineageParents(),
                path=chain,
            )
        )
    return messages
