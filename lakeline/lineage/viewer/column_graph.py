"""Following a column back across jobs, through the ``columnLineage`` facets of stored RunEvents.

Each COMPLETE event says, for every output field, which input fields feed it and how. Joined on
(namespace, dataset name), the events of stage A and of each stage B step form one graph, and a
column of the last table can be followed back to the raw columns it comes from. A path's
transformation is composed step by step (``column_model.compose``): DIRECT only if every step is
DIRECT; an INDIRECT step names the path after itself.

With ``indirect=True`` (the default) the dataset-wide inputs of every table on the way (the filters,
joins and groupings of the job that wrote it) count too, as INDIRECT inputs of each of its fields.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openlineage.client.event_v2 import RunEvent

from lakeline.errors import InvalidInputError
from lakeline.lineage.columns.model import NO_DEPENDENCIES, Dependencies, Transformation, TransformationType, compose
from lakeline.lineage.openlineage.events import event_to_dict
from lakeline.lineage.openlineage.naming import DatasetNaming, table_of
from lakeline.lineage.openlineage.reader import InputField, read_written_lineage, with_parts


@dataclass(frozen=True, order=True)
class FieldRef:
    namespace: str
    dataset: str
    field: str

    def __str__(self) -> str:
        # For reading: the Athena catalog prefix every catalog table's name carries is left out.
        return f"{table_of(self.dataset)}.{self.field}"


@dataclass(frozen=True, order=True)
class Link:
    """One input of a field: where it comes from, how, and which job said so."""

    source: FieldRef
    transformation: Transformation
    job: str
    dataset_level: bool = False


def _links(fields: Iterable[InputField], job: str, dataset_level: bool) -> set[Link]:
    return {
        Link(FieldRef(item.namespace, item.name, item.field), transformation, job, dataset_level)
        for item in fields
        for transformation in item.transformations
    }


@dataclass
class FieldLineageTree:
    """A field and the fields it comes from, as far back as the events go."""

    ref: FieldRef
    transformation: Transformation | None = None
    job: str | None = None
    dataset_level: bool = False
    cycle: bool = False
    children: list[FieldLineageTree] = field(default_factory=list)
    step: str | None = None
    """Set on a step inside one statement (a subquery's column and its expression): printed as it is."""


class ColumnGraph:
    def __init__(self) -> None:
        self._fields: dict[FieldRef, set[Link]] = {}
        self._datasets: dict[tuple[str, str], set[Link]] = {}

    @classmethod
    def from_events(cls, events: Iterable[RunEvent | Mapping[str, Any]]) -> ColumnGraph:
        graph = cls()
        # A run's COMPLETE event with the column lineage of its parts (an event too large to send whole).
        for event in with_parts(event_to_dict(e) if isinstance(e, RunEvent) else e for e in events):
            graph.add_event(event)
        return graph

    def add_event(self, event: RunEvent | Mapping[str, Any]) -> None:
        """Take the column lineage of one event; only COMPLETE events describe what was written."""
        data = event_to_dict(event) if isinstance(event, RunEvent) else event
        if str(data.get("eventType", "")).upper() != "COMPLETE":
            return
        written = read_written_lineage(data, "event")
        for namespace, name, lineage in written.outputs:
            for column, inputs in lineage.fields:
                ref = FieldRef(namespace, name, column)
                self._fields.setdefault(ref, set()).update(_links(inputs, written.job.key, False))
            dataset_links = _links(lineage.dataset, written.job.key, True)
            self._datasets.setdefault((namespace, name), set()).update(dataset_links)

    @property
    def fields(self) -> list[FieldRef]:
        return sorted(self._fields)

    def links(self, ref: FieldRef, *, indirect: bool = True) -> list[Link]:
        """The direct inputs of one field (and, with ``indirect``, of its whole dataset)."""
        links = set(self._fields.get(ref, set()))
        if indirect:
            links.update(self._datasets.get((ref.namespace, ref.dataset), set()))
        else:
            links = {link for link in links if link.transformation.type is TransformationType.DIRECT}
        # DIRECT inputs first, then the INDIRECT ones of the field, then those of its whole dataset.
        return sorted(links, key=lambda link: (link.transformation.type.value, link.dataset_level, link))

    def tree(self, ref: FieldRef, *, indirect: bool = True) -> FieldLineageTree:
        return self._tree(FieldLineageTree(ref), indirect, frozenset())

    def tree_from(
        self,
        ref: FieldRef,
        dependencies: Dependencies,
        naming: DatasetNaming,
        *,
        indirect: bool = True,
        dataset: Dependencies = NO_DEPENDENCIES,
    ) -> FieldLineageTree:
        """A tree whose first level is given (a statement's own lineage), followed back through the graph."""
        root = FieldLineageTree(ref)
        levels = [(edge, False) for edge in sorted(dependencies)]
        levels += [(edge, True) for edge in sorted(dataset)]
        for edge, dataset_level in levels:
            if not indirect and edge.transformation.type is TransformationType.INDIRECT:
                continue
            source = FieldRef(*naming.of(edge.source.dataset), edge.source.field)
            child = FieldLineageTree(source, edge.transformation, dataset_level=dataset_level)
            root.children.append(self._tree(child, indirect, frozenset({ref})))
        return root

    def _tree(self, node: FieldLineageTree, indirect: bool, path: frozenset[FieldRef]) -> FieldLineageTree:
        if node.ref in path:
            node.cycle = True
            return node
        for link in self.links(node.ref, indirect=indirect):
            child = FieldLineageTree(link.source, link.transformation, link.job, link.dataset_level)
            node.children.append(self._tree(child, indirect, path | {node.ref}))
        return node

    def origins(self, ref: FieldRef, *, indirect: bool = True) -> dict[FieldRef, set[Transformation]]:
        """The fields with no inputs of their own (raw columns) that ``ref`` comes from, and how."""
        found: dict[FieldRef, set[Transformation]] = {}
        for leaf in self._origins(ref, indirect, frozenset()):
            found.setdefault(leaf.source, set()).add(leaf.transformation)
        return found

    def _origins(self, ref: FieldRef, indirect: bool, path: frozenset[FieldRef]) -> set[_Reached]:
        reached: set[_Reached] = set()
        for link in self.links(ref, indirect=indirect):
            if link.source in path or link.source == ref:
                continue
            upstream = self._origins(link.source, indirect, path | {ref})
            if not upstream:
                reached.add(_Reached(link.source, link.transformation))
            for leaf in upstream:
                reached.add(_Reached(leaf.source, compose(link.transformation, leaf.transformation)))
        return reached


@dataclass(frozen=True)
class _Reached:
    source: FieldRef
    transformation: Transformation


def render_tree(tree: FieldLineageTree, *, title: str | None = None) -> str:
    """Ushas-style text: the field, then ``+-`` branches for what it comes from, indented per step."""
    lines = [title or str(tree.ref)]

    def walk(node: FieldLineageTree, indent: str) -> None:
        for child in node.children:
            if child.step is not None:
                lines.append(f"{indent}+- {child.step}")
                walk(child, indent + "   ")
                continue
            how = str(child.transformation) if child.transformation else ""
            notes = []
            if child.dataset_level:
                notes.append("dataset")
            if child.job:
                notes.append(f"job {child.job}")
            if child.cycle:
                notes.append("cycle")
            suffix = f"  [{', '.join(notes)}]" if notes else ""
            lines.append(f"{indent}+- {child.ref}  {how}{suffix}")
            walk(child, indent + "   ")

    walk(tree, "")
    return "\n".join(lines)


EVENT_FILE_SUFFIXES = (".json", ".jsonl", ".ndjson")


def load_events(path: Path) -> list[dict[str, Any]]:
    """Events stored as JSON lines (the file transport), a JSON array, or one JSON object; or a folder of
    such files, searched recursively (the archive's ``openlineage/`` folder, synced from S3)."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in EVENT_FILE_SUFFIXES)
        if not files:
            raise InvalidInputError(f"events folder {path} holds no .json or .jsonl files")
        return [event for file in files for event in load_events(file)]
    try:
        text = path.read_text()
    except OSError as error:
        raise InvalidInputError(f"cannot read events {path}: {error}") from error
    stripped = text.strip()
    if not stripped:
        return []
    events: list[Any]
    try:
        document = json.loads(stripped)
        events = document if isinstance(document, list) else [document]
    except json.JSONDecodeError:
        try:
            events = [json.loads(line) for line in stripped.splitlines() if line.strip()]
        except json.JSONDecodeError as error:
            raise InvalidInputError(f"events file {path} is not JSON lines or JSON: {error}") from error
    if not all(isinstance(event, dict) for event in events):
        raise InvalidInputError(f"events file {path} must hold JSON objects")
    return events
