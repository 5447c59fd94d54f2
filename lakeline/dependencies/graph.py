"""Cycle checks on the dependency graph (edges run source → target; "T needs S" means S → T).

A new or changed item for target T with sources S1..Sn closes a cycle exactly when T is already an
ancestor of some Si, i.e. walking *upstream* from the Si (what each dataset needs) reaches T.

The walk reads the ``dependencies`` table, not ``dependencies-by-table``: the dependencies table is
the source of truth and is keyed by target, so "what does X need" is one GetItem per dataset (batched
per level, never a scan), and it is current the moment an item is written. dependencies-by-table is
filled from the stream, so it lags behind a write and is empty where no stream Lambda runs (local
runs), which would let a cycle slip through.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping

from lakeline.errors import InvalidInputError

UpstreamLookup = Callable[[Collection[str]], Mapping[str, Collection[str]]]
"""Given datasets, return what each of them needs (datasets with no item may be left out)."""


def describe_cycle(cycle: list[str]) -> str:
    return (
        f"dependency cycle: {' needs '.join(cycle)}; a dataset cannot depend on itself, "
        "directly or through other datasets"
    )


class DependencyCycleError(InvalidInputError):
    def __init__(self, cycle: list[str]) -> None:
        self.cycle = cycle
        super().__init__(describe_cycle(cycle))


def find_cycle(target: str, sources: Iterable[str], upstream: UpstreamLookup) -> list[str] | None:
    """The cycle ``[target, ..., target]`` (read "needs") that ``target`` needing ``sources`` closes."""
    needed_by: dict[str, str] = {}  # dataset -> the dataset that needs it, on the way from target
    frontier: list[str] = []
    for source in sources:
        if source == target:
            return [target, target]
        if source not in needed_by:
            needed_by[source] = target
            frontier.append(source)
    while frontier:
        needs = upstream(frontier)
        next_frontier: list[str] = []
        for dataset in frontier:
            for ancestor in sorted(needs.get(dataset, ())):
                if ancestor == target:
                    path = [target, dataset]
                    while path[-1] != target:
                        path.append(needed_by[path[-1]])
                    # path runs target, dataset, ..., target backwards along "needed by"; read it as "needs"
                    return [target, *reversed(path[1:-1]), target]
                if ancestor not in needed_by:
                    needed_by[ancestor] = dataset
                    next_frontier.append(ancestor)
        frontier = next_frontier
    return None


def check_no_cycle(target: str, sources: Iterable[str], upstream: UpstreamLookup) -> None:
    cycle = find_cycle(target, sources, upstream)
    if cycle:
        raise DependencyCycleError(cycle)


def datasets_in_cycles(needs: Mapping[str, Collection[str]]) -> dict[str, list[str]]:
    """For a whole graph (dataset → what it needs): each dataset on a cycle, with one cycle through it.

    Strongly connected components (Tarjan, iterative): a dataset is on a cycle exactly when its
    component has more than one member (self-dependencies are rejected by the item model).
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    nodes = sorted(set(needs) | {s for sources in needs.values() for s in sources})
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(needs.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, pending = work[-1]
            if pending:
                child = pending.pop()
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, sorted(needs.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
    result: dict[str, list[str]] = {}
    for component in components:
        if len(component) < 2:
            continue
        members = set(component)
        inside: dict[str, list[str]] = {d: [s for s in needs.get(d, ()) if s in members] for d in members}

        def within(batch: Collection[str], inside: dict[str, list[str]] = inside) -> dict[str, list[str]]:
            return inside

        for dataset in component:
            cycle = find_cycle(dataset, inside[dataset], within)
            if cycle:
                result[dataset] = cycle
    return result


def cycle_problems(needs: Mapping[str, Collection[str]]) -> list[str]:
    """One line per cycle of a whole graph (dataset → what it needs), whatever its length."""
    seen: set[frozenset[str]] = set()
    problems = []
    for _, cycle in sorted(datasets_in_cycles(needs).items()):
        members = frozenset(cycle)
        if members not in seen:
            seen.add(members)
            problems.append(describe_cycle(cycle))
    return problems
