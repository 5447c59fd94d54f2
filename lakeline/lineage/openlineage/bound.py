"""Every event Lakeline emits under 300,000 characters, whatever the transport: a large event in parts.

Amazon DataZone's ``PostLineageEvent`` takes an event of at most 300,000 (botocore's model: the ``LineageEvent``
blob's ``max``), the smallest bound among the transports Lakeline sends through; every event is held to it,
measured as the UTF-8 bytes of its JSON as sent (never fewer than its characters).

What grows with a table is its datasets' facets: the ``schema`` of each input and output and an output's
``columnLineage`` (one entry per column). An event over the bound keeps its run, its job and its datasets'
identity (name and ``symlinks``), with as many of those facets (whole) and column lineage entries as fit, in
the event's order (part 0, its own ``eventType``); the rest go, in order, into RUNNING events of the same run
and time (parts 1, 2, ...), each naming the run (``parent``), the job, the inputs, and the outputs it carries
facets or entries of, with their ``symlinks`` so that a consumer matches the same tables. A schema facet is
never cut (consumers take a schema facet as the dataset's whole schema); a column lineage facet is, by column:
each part's facet has some of the columns, and the dataset-wide inputs travel once. The spec allows one START
and one COMPLETE, FAIL or ABORT per run, and consumers merge the facets of one run's events: so the extra parts
are RUNNING events, sent after a START and before an end event (the end event last, ``in_order``). A part is
named by its run, the event it came from and its number: that name gives the client token DataZone dedupes on
(``client_token``) and the part's key in the event archive.
"""

from __future__ import annotations

import copy
import json
import uuid
from dataclasses import dataclass
from typing import Any

import attrs
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import column_lineage_dataset
from openlineage.client.serde import Serde

EVENT_SIZE_LIMIT = 300_000
"""DataZone's bound on one event, applied to every event Lakeline emits."""
KEPT_ON_PARTS = {"run": ("parent", "processing_engine"), "job": ("jobType",)}
"""The run and job facets a RUNNING part repeats: what places the run."""
IDENTITY_FACETS = ("symlinks",)
"""The dataset facets every part repeats: the datasets' other names."""
_TOKENS = uuid.UUID("6f1d3c52-8a43-4f0e-9d7c-2b4f43a3e0a1")
"""Namespace of the client tokens' name-based UUIDs (any fixed UUID: tokens only need to be stable)."""


class EventTooLarge(ValueError):
    """An event over the bound with no dataset facets but its identity (a SQL text that large), or one facet
    that large."""


def event_size(event: RunEvent) -> int:
    """Bytes of the event's JSON as openlineage-python's transports serialise it."""
    return len(Serde.to_json(event).encode("utf-8"))


def client_token(run_id: str, event_type: str, part: int = 0) -> str:
    """The idempotency token of one part of one event: the same for the same event sent again. Not its time:
    a run has one START and one end event (other RUNNING events are parts), and a retried function dates
    its end event anew."""
    return str(uuid.uuid5(_TOKENS, f"{run_id}/{event_type}/{part}"))


@dataclass(frozen=True)
class EventPart:
    event: RunEvent
    of: str
    """The ``eventType`` of the event it is a part of (its own, for part 0)."""
    number: int = 0

    @property
    def client_token(self) -> str:
        return client_token(self.event.run.runId, self.of, self.number)

    @property
    def archive_name(self) -> str:
        """``<runId>.<EVENTTYPE>`` for a whole event (or part 0), ``<runId>.<EVENTTYPE>.part<N>`` for the others."""
        name = f"{self.event.run.runId}.{self.of}"
        return f"{name}.part{self.number}" if self.number else name


def _member_size(name: str, value: Any) -> int:
    # One '"name": {...}' member and its ", " separator, as Serde.to_json writes it (sort_keys, ASCII).
    return len(json.dumps(name)) + 2 + len(json.dumps(Serde.to_dict(value), sort_keys=True)) + 2


def _kept(facets: dict[str, Any] | None, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: facet for name, facet in (facets or {}).items() if name in names}


@dataclass(frozen=True)
class _Item:
    """What parts share out: a whole dataset facet, or one entry of an output's column lineage."""

    side: str
    """``inputs`` or ``outputs``."""
    index: int
    facet: str
    value: Any
    column: str | None = None
    """The entry's column; ``None``: the whole facet (for ``columnLineage``, its dataset-wide inputs)."""

    @property
    def size(self) -> int:
        if self.column is not None:
            return _member_size(self.column, self.value)
        return _member_size(self.facet, self.value)


def _items(event: RunEvent) -> list[_Item]:
    items = []
    for side in ("inputs", "outputs"):
        for index, dataset in enumerate(getattr(event, side) or []):
            for name, facet in (dataset.facets or {}).items():
                if name in IDENTITY_FACETS:
                    continue
                if isinstance(facet, column_lineage_dataset.ColumnLineageDatasetFacet):
                    items.append(_Item(side, index, name, _lineage_facet({}, facet.dataset or [], facet._producer)))
                    items += [_Item(side, index, name, f, column) for column, f in facet.fields.items()]
                else:
                    items.append(_Item(side, index, name, facet))
    return items


def _facets(dataset: InputDataset | OutputDataset, items: list[_Item]) -> dict[str, Any]:
    facets = _kept(dataset.facets, IDENTITY_FACETS)
    for item in items:
        if item.column is None and not isinstance(item.value, column_lineage_dataset.ColumnLineageDatasetFacet):
            facets[item.facet] = item.value
    lineage = [item for item in items if isinstance(item.value, column_lineage_dataset.ColumnLineageDatasetFacet)]
    entries = {item.column: item.value for item in items if item.column is not None}
    if lineage or entries:
        name = (lineage or items)[0].facet
        producer = (dataset.facets or {})[name]._producer
        facets[name] = _lineage_facet(entries, lineage[0].value.dataset if lineage else [], producer)
    return facets


def _lineage_facet(
    fields: dict[str, Any], dataset: list[Any], producer: str
) -> column_lineage_dataset.ColumnLineageDatasetFacet:
    """Some of a column lineage facet: ``fields``, and its dataset-wide inputs or none."""
    facet = column_lineage_dataset.ColumnLineageDatasetFacet(fields=fields, dataset=dataset)
    facet._producer = producer
    return facet


def _part(event: RunEvent, items: list[_Item], number: int) -> RunEvent:
    """Part ``number`` of ``event`` with ``items``: the event's run and job (0) or a RUNNING event's."""
    if number == 0:
        made = copy.copy(event)
    else:
        made = RunEvent(
            eventType=RunState.RUNNING,
            eventTime=event.eventTime,
            run=Run(runId=event.run.runId, facets=_kept(event.run.facets, KEPT_ON_PARTS["run"])),
            job=Job(
                namespace=event.job.namespace, name=event.job.name, facets=_kept(event.job.facets, KEPT_ON_PARTS["job"])
            ),
            producer=event.producer,
        )
    for side, kind in (("inputs", InputDataset), ("outputs", OutputDataset)):
        datasets = []
        for index, dataset in enumerate(getattr(event, side) or []):
            mine = [item for item in items if item.side == side and item.index == index]
            if number > 0 and side == "outputs" and not mine:
                continue  # an output is there for what it carries; every input is, to place the job
            if number == 0:  # the event's own datasets, their input and output facets too
                datasets.append(attrs.evolve(dataset, facets=_facets(dataset, mine)))
            else:
                datasets.append(kind(namespace=dataset.namespace, name=dataset.name, facets=_facets(dataset, mine)))
        setattr(made, side, datasets)
    return made


def split_event(event: RunEvent, limit: int = EVENT_SIZE_LIMIT) -> list[EventPart]:
    """``event`` as parts of at most ``limit`` bytes each (one part when it fits), numbered in the event's order.

    Items are packed by their serialised size, then each part is measured as a whole: a part over the
    limit (an estimate missed a few bytes) hands its last items on to the next part.
    """
    state = event.eventType.value if isinstance(event.eventType, RunState) else str(event.eventType)
    if event_size(event) <= limit:
        return [EventPart(event, state)]
    items = _items(event)
    bases = [event_size(_part(event, [], 0)), event_size(_part(event, [], 1))]
    if bases[0] > limit:
        raise EventTooLarge(f"event of {event.job.name} is {bases[0]} bytes with no dataset facets (limit {limit})")
    # What an output adds to a RUNNING part that carries something of it: its identity.
    empty = column_lineage_dataset.ColumnLineageDatasetFacet(fields={}, dataset=[])
    identity = {
        index: event_size(_part(event, [_Item("outputs", index, "columnLineage", empty)], 1)) - bases[1]
        for index in {item.index for item in items if item.side == "outputs"}
    }
    parts: list[EventPart] = []
    waiting = items
    while waiting or not parts:
        number = len(parts)
        group = _fill(waiting, bases[min(number, 1)], identity if number else {}, limit)
        made = _part(event, group, number)
        while (size := event_size(made)) > limit and len(group) > 1:
            group = group[:-1]
            made = _part(event, group, number)
        if size > limit:
            raise EventTooLarge(f"{group[0].facet} of a dataset of {event.job.name} alone is over {limit} bytes")
        parts.append(EventPart(made, state, number))
        waiting = waiting[len(group) :]
    return parts


def _fill(items: list[_Item], base: int, identity: dict[int, int], limit: int) -> list[_Item]:
    """The first items that fit on a part of ``base`` bytes, always at least one; ``identity``: what each
    output adds to a RUNNING part the first time it carries something of it."""
    used = base
    seen: set[int] = set()
    group: list[_Item] = []
    for item in items:
        size = item.size
        if item.side == "outputs" and item.index in identity and item.index not in seen:
            size += identity[item.index]
        if group and used + size > limit:
            break
        group.append(item)
        used += size
        if item.side == "outputs":
            seen.add(item.index)
    return group


def in_order(parts: list[EventPart]) -> list[EventPart]:
    """The order to send: a START before its RUNNING parts; an end event after them."""
    if len(parts) < 2 or parts[0].of in (RunState.START.value, RunState.RUNNING.value):
        return parts
    return [*parts[1:], parts[0]]
