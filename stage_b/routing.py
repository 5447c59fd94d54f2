"""Routing: after a table's partition is finished, which targets run next, at which partition.

1. One Query on dependencies-by-table by the finished table (no scans) lists its targets, each pair
   carrying what is needed to map the partition (validated on read).
2. Every target's destination partitions are computed first (one, or with a dependency's
   ``TargetRange`` several: a day feeds each trailing window that contains it). A target that cannot
   be routed (an invalid pair, a date shifted out of the calendar, a loop) is set aside with its
   reason and the others go on: one target's failure never blocks the others. The caller parks the
   set-aside targets (queue B's DLQ in the cloud, the run's summary locally).
3. Trigger mode ``any`` (the seed's behaviour): every arrival produces a stage B message. Mode ``all``:
   the arrival is recorded for the target partition; no message until the set of sources is complete,
   then one from the arrival that completes it, and one from every arrival after that (late data, see
   lakeline.dependencies.arrivals). Its message names, beside its trigger, every other source's latest
   recorded arrival (``also_lineage``: its place in the lineage records and the version it published).
   Recording is idempotent, so a failed routing can simply be retried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from lakeline.dependencies.arrivals import ArrivalTracker
from lakeline.dependencies.model import DependencyEdge, InvalidEdge
from lakeline.dependencies.resolve import destination_partitions, partition_path
from lakeline.errors import ConfigError, InvalidInputError
from stage_b.messages import LineageParents, SourceArrival, StageBMessage


class EdgeSource(Protocol):
    def edges_from(self, source_table: str) -> Sequence[DependencyEdge | InvalidEdge]: ...


@dataclass(frozen=True)
class Unrouted:
    """A target of a finished partition that could not be routed, and why (one line)."""

    trigger: SourceArrival
    target_dataset: str
    reason: str

    def describe(self) -> str:
        return f"{self.trigger.node} → {self.target_dataset}: not routed: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        """The body parked in queue B's DLQ (not a stage B message: fix the item, then route again)."""
        return {
            "unrouted": {
                "trigger": self.trigger.model_dump(),
                "target_dataset": self.target_dataset,
                "reason": self.reason,
            }
        }


@dataclass
class Routing:
    """What a finished partition triggers: the stage B messages, and the targets set aside."""

    messages: list[StageBMessage] = field(default_factory=list)
    unrouted: list[Unrouted] = field(default_factory=list)


@dataclass(frozen=True)
class PlannedRoute:
    edge: DependencyEdge
    partition: dict[str, str]

    @property
    def node(self) -> str:
        return f"{self.edge.target_dataset}/{partition_path(self.partition)}"


def plan_routes(
    arrival: SourceArrival, edges: Sequence[DependencyEdge | InvalidEdge], path: Sequence[str] = ()
) -> tuple[list[PlannedRoute], list[Unrouted]]:
    """Destination partitions for every target that has one, and the targets set aside with their reason."""
    routes: list[PlannedRoute] = []
    unrouted: list[Unrouted] = []
    for edge in sorted(edges, key=lambda edge: edge.target_dataset):
        if isinstance(edge, InvalidEdge):
            unrouted.append(
                Unrouted(arrival, edge.target_dataset, f"invalid dependencies-by-table item: {edge.problem}")
            )
            continue
        try:
            partitions = destination_partitions(
                edge.dependency, edge.partition_column, edge.partition_python_mask, arrival.partition
            )
        except InvalidInputError as error:
            unrouted.append(Unrouted(arrival, edge.target_dataset, " ".join(str(error).split())))
            continue
        for partition in partitions:
            route = PlannedRoute(edge, partition)
            if route.node in path or route.node == arrival.node:
                unrouted.append(
                    Unrouted(arrival, edge.target_dataset, f"{route.node} was already built in this chain (a loop)")
                )
                continue
            routes.append(route)
    return routes, unrouted


def route_finished_partition(
    finished_table: str,
    partition: Mapping[str, str],
    edges: EdgeSource,
    arrivals: ArrivalTracker | None = None,
    lineage: LineageParents | None = None,
    path: Sequence[str] = (),
    run: str | None = None,
    version: str | None = None,
) -> Routing:
    """The stage B messages a finished partition produces (none if it triggers nothing), and the targets
    it could not route.

    ``path`` is the chain of nodes built before this one (from the stage B message being finished);
    ``arrivals`` is required only when a target uses trigger mode ``all``; ``run`` identifies the run
    that produced this version of the partition, ``version`` its token (``lakeline.commits.versions``).
    """
    arrival = SourceArrival(table=finished_table, partition=dict(partition), run=run, version=version)
    routes, unrouted = plan_routes(arrival, edges.edges_from(arrival.table), path)
    if arrivals is None and any(route.edge.trigger_mode == "all" for route in routes):
        raise ConfigError("a target uses triggerMode 'all' but no pipeline-state table was configured")
    chain = [*path, arrival.node]
    messages: list[StageBMessage] = []
    for route in routes:
        every_source = route.edge.trigger_mode == "all"
        also: list[LineageParents] = []
        if every_source and arrivals is not None:
            here = (lineage.root_id, lineage.parent_id) if lineage and lineage.root_id and lineage.parent_id else None
            decision = arrivals.record_arrival(
                route.node, arrival.table, arrival.node, route.edge.sources, here, arrival.version
            )
            if not decision.triggers:
                continue
            also = [
                LineageParents(
                    root_id=source.root_id, parent_id=source.node_id, table=source.table, version=source.version
                )
                for source in decision.sources_lineage
            ]
        messages.append(
            StageBMessage(
                target_dataset=route.edge.target_dataset,
                partition=route.partition,
                trigger=arrival,
                usage=route.edge.dependency.usage,
                lineage=lineage or LineageParents(),
                path=chain,
                # An append into an `all` target is one set of rows for the set of sources: whichever
                # source arrives again, they are replaced.
                contribution="all" if every_source else None,
                also_lineage=also,
            )
        )
    return Routing(messages, unrouted)
