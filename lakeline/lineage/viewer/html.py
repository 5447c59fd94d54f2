"""``lineage.html``: one self-contained page that draws OpenLineage RunEvents as an interactive graph.

The graph has one node per dataset (namespace + name, shown as ``database.table``) and one per job, with
edges input dataset -> job -> output dataset, merged across runs. A job shows the state of its latest run
(a FAIL or ABORT is marked) and its SQL. Column-level edges come from the ``columnLineage`` facets of
COMPLETE events, as in ``lineage.columns.graph``: only a finished run says what was written.

The layout is computed here (layers left to right by longest path, cycles broken at DFS back edges, a
few barycenter sweeps against crossings), so the page needs no layout library. The page is one file:
inline CSS, inline SVG and an inline script that builds the nodes from an embedded JSON block. Its
Content-Security-Policy forbids every request, so it opens the same offline as online.

In the page: click a dataset to show its columns, click a column to highlight where it comes from
(DIRECT solid, INDIRECT dashed, through every job on the way), hover a job for its SQL and run state,
type in the search box to filter nodes by name. ``#dataset=NAME&column=FIELD`` in the address selects a
column on load, ``#search=TEXT`` filters.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lakeline.errors import InvalidInputError
from lakeline.lineage.columns.model import Subtype, Transformation, TransformationType

DEFAULT_TITLE = "Lakeline lineage"

FAILED_STATES = frozenset({"FAIL", "ABORT"})

# Geometry of the collapsed nodes, in SVG pixels; the page uses the same numbers when it expands one.
NODE_HEIGHT = 40
NODE_GAP = 18
LAYER_GAP = 90
MIN_NODE_WIDTH = 150
MAX_NODE_WIDTH = 300
CHAR_WIDTH = 7.2
"""Width of one character of the 12px label font, roughly; labels longer than a node allows are cut."""
SMALL_CHAR_WIDTH = 6.6
"""The same for the 10-11px captions and column rows."""
LABEL_PADDING = 26
TYPE_CHARS = 14
"""Column types longer than this are cut in the rows (the panel shows them whole)."""
MARGIN = 30
ORDERING_SWEEPS = 4


@dataclass(frozen=True)
class Column:
    name: str
    type: str | None = None


@dataclass
class DatasetNode:
    id: str
    namespace: str
    name: str
    columns: dict[str, Column] = field(default_factory=dict)

    def add_column(self, name: str, kind: str | None) -> None:
        known = self.columns.get(name)
        if known is None or (kind and not known.type):
            self.columns[name] = Column(name, kind or (known.type if known else None))


@dataclass
class JobNode:
    id: str
    namespace: str
    name: str
    state: str = ""
    event_time: str = ""
    run_id: str = ""
    runs: int = 0
    failed_runs: int = 0
    sql: str | None = None
    dialect: str | None = None
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.state in FAILED_STATES


@dataclass(frozen=True)
class ColumnEdge:
    """``source.source_field`` feeds ``target.target_field`` through ``job``; no target field: the whole dataset."""

    source: str
    source_field: str
    target: str
    target_field: str | None
    job: str
    transformation: Transformation

    def sort_key(self) -> tuple[str, bool, str, str, str, str, Transformation]:
        target_field = self.target_field or ""
        return (
            self.target,
            self.target_field is None,
            target_field,
            self.source,
            self.source_field,
            self.job,
            self.transformation,
        )


@dataclass(frozen=True)
class Placement:
    layer: int
    x: float
    y: float
    width: float
    height: float


@dataclass
class LineageGraph:
    datasets: dict[str, DatasetNode] = field(default_factory=dict)
    jobs: dict[str, JobNode] = field(default_factory=dict)
    edges: set[tuple[str, str]] = field(default_factory=set)
    column_edges: set[ColumnEdge] = field(default_factory=set)

    @property
    def node_ids(self) -> list[str]:
        return [*self.datasets, *self.jobs]

    def label(self, node_id: str) -> str:
        node = self.datasets.get(node_id) or self.jobs[node_id]
        return node.name


def dataset_id(namespace: str, name: str) -> str:
    return f"dataset:{namespace}/{name}"


def job_id(namespace: str, name: str) -> str:
    return f"job:{namespace}/{name}"


# ---------------------------------------------------------------------------------------------- events


@dataclass(frozen=True)
class _Event:
    index: int
    data: Mapping[str, Any]
    state: str
    time: datetime
    run_id: str
    job: str


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInputError(f"{where} must be a non-empty string, not {value!r}")
    return value


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{where} must be a JSON object, not {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInputError(f"{where} must be a JSON array, not {type(value).__name__}")
    return value


def _event_time(value: Any, where: str) -> datetime:
    text = _text(value, f"{where} eventTime")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(f"{where} eventTime {text!r} is not an ISO 8601 time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _read_event(index: int, data: Mapping[str, Any]) -> _Event:
    where = f"event {index + 1}"
    if not isinstance(data, Mapping):
        raise InvalidInputError(f"{where} must be a JSON object, not {type(data).__name__}")
    job = _mapping(data.get("job"), f"{where} job")
    namespace = _text(job.get("namespace"), f"{where} job.namespace")
    name = _text(job.get("name"), f"{where} job.name")
    run = _mapping(data.get("run"), f"{where} run")
    return _Event(
        index=index,
        data=data,
        state=str(data.get("eventType") or "OTHER").upper(),
        time=_event_time(data.get("eventTime"), where),
        run_id=str(run.get("runId") or ""),
        job=job_id(namespace, name),
    )


def _transformations(raw: Mapping[str, Any], where: str) -> list[Transformation]:
    items = _list(raw.get("transformations"), f"{where} transformations")
    if not items:
        # Facets older than spec 1-1 carry no transformations: all that is known is that it feeds.
        return [Transformation(TransformationType.DIRECT, Subtype.TRANSFORMATION)]
    result = []
    for item in items:
        try:
            kind = TransformationType(str(item["type"]).upper())
            default = Subtype.TRANSFORMATION if kind is TransformationType.DIRECT else Subtype.FILTER
            subtype = Subtype(str(item.get("subtype") or default).upper())
            result.append(Transformation(kind, subtype, bool(item.get("masking") or False)))
        except (KeyError, ValueError, TypeError, AttributeError) as error:
            raise InvalidInputError(f"{where}: transformation {item!r} is not valid: {error}") from error
    return result


class _GraphBuilder:
    def __init__(self) -> None:
        self.graph = LineageGraph()

    def dataset(self, raw: Any, where: str) -> DatasetNode:
        data = _mapping(raw, where)
        namespace = _text(data.get("namespace"), f"{where} namespace")
        name = _text(data.get("name"), f"{where} name")
        key = dataset_id(namespace, name)
        node = self.graph.datasets.get(key)
        if node is None:
            node = self.graph.datasets[key] = DatasetNode(key, namespace, name)
        return node

    def add(self, event: _Event) -> None:
        where = f"event {event.index + 1} ({event.job})"
        job_data = _mapping(event.data.get("job"), f"{where} job")
        if event.job not in self.graph.jobs:
            self.graph.jobs[event.job] = JobNode(event.job, str(job_data["namespace"]), str(job_data["name"]))
        for position, raw in enumerate(_list(event.data.get("inputs"), f"{where} inputs")):
            node = self.dataset(raw, f"{where} inputs[{position}]")
            self._schema(node, raw, f"{where} inputs[{position}]")
            self.graph.edges.add((node.id, event.job))
        for position, raw in enumerate(_list(event.data.get("outputs"), f"{where} outputs")):
            node = self.dataset(raw, f"{where} outputs[{position}]")
            self._schema(node, raw, f"{where} outputs[{position}]")
            self.graph.edges.add((event.job, node.id))
            if event.state == "COMPLETE":
                self._column_lineage(node, event.job, raw, f"{where} outputs[{position}]")

    def _schema(self, node: DatasetNode, raw: Mapping[str, Any], where: str) -> None:
        facets = _mapping(raw.get("facets"), f"{where} facets")
        schema = _mapping(facets.get("schema"), f"{where} schema facet")
        for column in _list(schema.get("fields"), f"{where} schema fields"):
            column = _mapping(column, f"{where} schema field")
            kind = column.get("type")
            node.add_column(_text(column.get("name"), f"{where} schema field name"), str(kind) if kind else None)

    def _column_lineage(self, node: DatasetNode, job: str, raw: Mapping[str, Any], where: str) -> None:
        facets = _mapping(raw.get("facets"), f"{where} facets")
        facet = _mapping(facets.get("columnLineage"), f"{where} columnLineage facet")
        for name, column in _mapping(facet.get("fields"), f"{where} columnLineage fields").items():
            node.add_column(str(name), None)
            inputs = _mapping(column, f"{where} columnLineage field {name}").get("inputFields")
            self._input_fields(node, str(name), job, inputs, f"{where} columnLineage field {name}")
        self._input_fields(node, None, job, facet.get("dataset"), f"{where} columnLineage dataset")

    def _input_fields(self, node: DatasetNode, target_field: str | None, job: str, raw: Any, where: str) -> None:
        for item in _list(raw, f"{where} inputFields"):
            item = _mapping(item, f"{where} input field")
            source = self.dataset(item, f"{where} input field")
            source_field = _text(item.get("field"), f"{where} input field's field")
            source.add_column(source_field, None)
            for transformation in _transformations(item, f"{where} input {source.name}.{source_field}"):
                self.graph.column_edges.add(
                    ColumnEdge(source.id, source_field, node.id, target_field, job, transformation)
                )

    def finish(self, events: list[_Event]) -> LineageGraph:
        runs: dict[str, dict[str, list[_Event]]] = {}
        for event in events:
            runs.setdefault(event.job, {}).setdefault(event.run_id or f"#{event.index}", []).append(event)
        for key, by_run in runs.items():
            job = self.graph.jobs[key]
            latest = {run: max(items, key=lambda e: (e.time, e.index)) for run, items in by_run.items()}
            last = max(latest.values(), key=lambda e: (e.time, e.index))
            job.state, job.event_time, job.run_id = last.state, last.time.isoformat(), last.run_id
            job.runs = len(latest)
            job.failed_runs = sum(1 for event in latest.values() if event.state in FAILED_STATES)
            # The latest SQL any event of the job says (a FAIL event may not repeat it).
            for event in sorted((e for items in by_run.values() for e in items), key=lambda e: (e.time, e.index)):
                where = f"event {event.index + 1} ({key})"
                facets = _mapping(_mapping(event.data.get("job"), f"{where} job").get("facets"), f"{where} job facets")
                sql = _mapping(facets.get("sql"), f"{where} sql facet")
                if sql.get("query"):
                    job.sql, job.dialect = str(sql["query"]), str(sql.get("dialect") or "") or None
            if job.failed:
                run_facets = _mapping(_mapping(last.data.get("run"), "run").get("facets"), "run facets")
                message = _mapping(run_facets.get("errorMessage"), "errorMessage facet").get("message")
                job.error = str(message) if message else None
        return self.graph


def build_lineage_graph(events: Iterable[Mapping[str, Any]]) -> LineageGraph:
    """The datasets, jobs and edges that ``events`` describe, merged across runs."""
    read = [_read_event(index, data) for index, data in enumerate(events)]
    builder = _GraphBuilder()
    for event in read:
        builder.add(event)
    return builder.finish(read)


# ---------------------------------------------------------------------------------------------- layout


def _acyclic_edges(nodes: list[str], edges: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """``edges`` less the back edges of a depth-first search, so that layers can be counted."""
    successors: dict[str, list[str]] = {node: [] for node in nodes}
    for source, target in sorted(edges):
        successors[source].append(target)
    state: dict[str, int] = {}  # 1 on the DFS path, 2 done
    back: set[tuple[str, str]] = set()
    for start in nodes:
        if start in state:
            continue
        state[start] = 1
        stack = [(start, iter(successors[start]))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(successors[child])))
            elif state[child] == 1:
                back.add((node, child))
    return {edge for edge in edges if edge not in back and edge[0] != edge[1]}


def _layers(nodes: list[str], edges: set[tuple[str, str]]) -> dict[str, int]:
    dag = _acyclic_edges(nodes, edges)
    predecessors: dict[str, set[str]] = {node: set() for node in nodes}
    successors: dict[str, set[str]] = {node: set() for node in nodes}
    for source, target in dag:
        predecessors[target].add(source)
        successors[source].add(target)
    waiting = {node: len(predecessors[node]) for node in nodes}
    ready = [node for node in nodes if waiting[node] == 0]
    order: list[str] = []
    while ready:
        node = ready.pop()
        order.append(node)
        for child in successors[node]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    layer = {node: 0 for node in nodes}
    for node in order:
        for child in successors[node]:
            layer[child] = max(layer[child], layer[node] + 1)
    # A dataset only read (a raw table) sits just before its first reader, not far left of it.
    for node in reversed(order):
        if not predecessors[node] and successors[node]:
            layer[node] = min(layer[child] for child in successors[node]) - 1
    return layer


def _node_width(graph: LineageGraph, node_id: str) -> float:
    """Wide enough for the name, the caption under it and, for a dataset, its column rows."""
    wanted = len(graph.label(node_id)) * CHAR_WIDTH
    if node_id in graph.jobs:
        job = graph.jobs[node_id]
        caption = f"! {job.state} - {job.runs} runs ({job.failed_runs} failed)"
        wanted = max(wanted, len(caption) * SMALL_CHAR_WIDTH)
    else:
        for column in graph.datasets[node_id].columns.values():
            # A row: the name, then the type (cut to TYPE_CHARS) and a 10px gap, as the page draws it.
            kind = min(len(column.type or ""), TYPE_CHARS) * SMALL_CHAR_WIDTH + 10 if column.type else 0
            wanted = max(wanted, len(column.name) * SMALL_CHAR_WIDTH + kind)
    return float(min(MAX_NODE_WIDTH, max(MIN_NODE_WIDTH, round(wanted + LABEL_PADDING))))


def _resolve_overlaps(column: list[str], wanted: dict[str, float]) -> dict[str, float]:
    """Keep the order of ``column`` and move nodes down just enough that none overlaps the one above."""
    placed: dict[str, float] = {}
    bottom = float("-inf")
    for node in column:
        y = max(wanted[node], bottom)
        placed[node] = y
        bottom = y + NODE_HEIGHT + NODE_GAP
    # Centre the column on what it wanted, so pushing down does not drift everything downwards.
    shift = sum(wanted[n] - placed[n] for n in column) / len(column) if column else 0.0
    return {node: y + shift for node, y in placed.items()}


def layout(graph: LineageGraph) -> dict[str, Placement]:
    """Where each node goes: layers left to right, barycenter order in each layer, edges kept short."""
    nodes = sorted(graph.node_ids, key=lambda n: (graph.label(n), n))
    if not nodes:
        return {}
    layer = _layers(nodes, graph.edges)
    neighbours: dict[str, set[str]] = {node: set() for node in nodes}
    for source, target in graph.edges:
        if source != target:
            neighbours[source].add(target)
            neighbours[target].add(source)
    depth = max(layer.values()) + 1
    columns: list[list[str]] = [[] for _ in range(depth)]
    for node in nodes:
        columns[layer[node]].append(node)
    position = {node: index for column in columns for index, node in enumerate(column)}

    def sweep(indices: Iterable[int], towards: int) -> None:
        for index in indices:
            column = columns[index]

            def barycenter(node: str) -> float:
                near = [position[n] for n in neighbours[node] if layer[n] - layer[node] == towards]
                return sum(near) / len(near) if near else float(position[node])

            column.sort(key=barycenter)
            for rank, node in enumerate(column):
                position[node] = rank

    for _ in range(ORDERING_SWEEPS):
        sweep(range(1, depth), -1)
        sweep(range(depth - 2, -1, -1), 1)

    step = NODE_HEIGHT + NODE_GAP
    y: dict[str, float] = {}
    for index, column in enumerate(columns):
        wanted = {}
        for rank, node in enumerate(column):
            before = [y[n] for n in neighbours[node] if n in y and layer[n] < index]
            wanted[node] = sum(before) / len(before) if before else rank * step
        y.update(_resolve_overlaps(column, wanted))
    # Nodes with nothing on their left (sources pulled right) line up with what they feed.
    for index in range(depth - 2, -1, -1):
        column = columns[index]
        wanted = {}
        for node in column:
            after = [y[n] for n in neighbours[node] if layer[n] > index]
            fed = any(layer[n] < index for n in neighbours[node])
            wanted[node] = sum(after) / len(after) if after and not fed else y[node]
        column.sort(key=lambda n: (wanted[n], position[n]))
        y.update(_resolve_overlaps(column, wanted))
    top = min(y.values())

    widths = {node: _node_width(graph, node) for node in nodes}
    x = float(MARGIN)
    placements = {}
    for index, column in enumerate(columns):
        width = max((widths[node] for node in column), default=MIN_NODE_WIDTH)
        for node in column:
            placements[node] = Placement(index, x, y[node] - top + MARGIN, widths[node], NODE_HEIGHT)
        x += width + LAYER_GAP
    return placements


# ---------------------------------------------------------------------------------------------- page


def graph_document(graph: LineageGraph, *, title: str = DEFAULT_TITLE) -> dict[str, Any]:
    """The JSON the page draws: nodes with their places, dataset edges and column edges."""
    placements = layout(graph)
    nodes: list[dict[str, Any]] = []
    for node_id in sorted(placements, key=lambda n: (placements[n].layer, placements[n].y)):
        place = placements[node_id]
        item: dict[str, Any] = {
            "id": node_id,
            "layer": place.layer,
            "x": place.x,
            "y": place.y,
            "width": place.width,
            "height": place.height,
        }
        if node_id in graph.datasets:
            dataset = graph.datasets[node_id]
            item |= {
                "kind": "dataset",
                "namespace": dataset.namespace,
                "name": dataset.name,
                "columns": [{"name": c.name, "type": c.type} for c in dataset.columns.values()],
            }
        else:
            job = graph.jobs[node_id]
            item |= {
                "kind": "job",
                "namespace": job.namespace,
                "name": job.name,
                "state": job.state,
                "failed": job.failed,
                "eventTime": job.event_time,
                "runId": job.run_id,
                "runs": job.runs,
                "failedRuns": job.failed_runs,
                "sql": job.sql,
                "dialect": job.dialect,
                "error": job.error,
            }
        nodes.append(item)
    return {
        "title": title,
        "nodes": nodes,
        "edges": [{"source": s, "target": t} for s, t in sorted(graph.edges)],
        "columnEdges": [
            {
                "source": edge.source,
                "sourceField": edge.source_field,
                "target": edge.target,
                "targetField": edge.target_field,
                "job": edge.job,
                "type": edge.transformation.type.value,
                "subtype": edge.transformation.subtype.value,
                "masking": edge.transformation.masking,
            }
            for edge in sorted(graph.column_edges, key=ColumnEdge.sort_key)
        ],
    }


def script_safe_json(document: Any) -> str:
    """JSON that can sit inside a ``<script>`` element: no ``<``, ``>`` or ``&`` a parser could act on."""
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text


def _sha256(source: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii")


def render_lineage_html(events: Iterable[Mapping[str, Any]], *, title: str = DEFAULT_TITLE) -> str:
    """The whole page for ``events`` (RunEvents as JSON objects), as one string."""
    document = graph_document(build_lineage_graph(events), title=title)
    style, script = PAGE_STYLE, PAGE_SCRIPT
    # Nothing may be fetched: only this page's own style and script run, and no request leaves it.
    policy = (
        f"default-src 'none'; style-src '{_sha256(style)}'; script-src '{_sha256(script)}'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    heading = html.escape(title)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{html.escape(policy, quote=False)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{heading}</title>
<style>{style}</style>
</head>
<body>
<header>
<h1>{heading}</h1>
<input id="search" type="search" placeholder="Filter by name" aria-label="Filter nodes by name" autocomplete="off">
<label class="toggle"><input id="indirect" type="checkbox" checked> INDIRECT inputs</label>
<button id="fit" type="button">Fit</button>
<span id="summary"></span>
</header>
<main>
<svg id="graph" role="img" aria-label="Lineage graph of datasets and jobs">
<defs>
<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
<path d="M0,0 L10,5 L0,10 z"></path>
</marker>
</defs>
<g id="viewport"><g id="edges"></g><g id="column-edges"></g><g id="nodes"></g></g>
</svg>
<aside id="details"></aside>
<div id="tooltip" hidden></div>
</main>
<script type="application/json" id="lineage-data">{script_safe_json(document)}</script>
<script>{script}</script>
</body>
</html>
"""


def write_lineage_html(events: Iterable[Mapping[str, Any]], path: Path, *, title: str = DEFAULT_TITLE) -> Path:
    """Write the page to ``path`` at once: a reader sees the old file or the new one, never half of it."""
    page = render_lineage_html(events, title=title)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(page)
        Path(temporary).chmod(0o644)
        Path(temporary).replace(path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


# ---------------------------------------------------------------------------------------------- assets
# Kept in this module so that the page is one string with no file to find at run time.

PAGE_STYLE = r"""
:root { --dataset: #3b73b9; --dataset-fill: #eef4fc; --job: #b7791f; --job-fill: #fff7e6;
  --fail: #c62828; --fail-fill: #fdecec; --direct: #2e7d32; --indirect: #8e24aa; --ink: #1f2933; }
* { box-sizing: border-box; }
html, body { height: 100%; margin: 0; }
body { display: flex; flex-direction: column; font: 13px/1.4 "DejaVu Sans", Arial, sans-serif; color: var(--ink); }
header { display: flex; align-items: center; gap: 12px; padding: 8px 14px; border-bottom: 1px solid #d5dbe3;
  background: #f7f9fb; }
header h1 { font-size: 16px; margin: 0 12px 0 0; white-space: nowrap; }
#search { width: 260px; padding: 4px 8px; border: 1px solid #b8c2cc; border-radius: 4px; font: inherit; }
.toggle { white-space: nowrap; user-select: none; }
#fit { font: inherit; padding: 3px 10px; }
#summary { color: #52606d; margin-left: auto; white-space: nowrap; }
main { position: relative; flex: 1; min-height: 0; }
#graph { display: block; width: 100%; height: 100%; background: #fcfdfe; cursor: grab; }
#graph.panning { cursor: grabbing; }
#arrow path { fill: #7b8794; }
.edge { fill: none; stroke: #9aa5b1; stroke-width: 1.4; }
.edge.failed { stroke: var(--fail); }
.edge.on-path { stroke: #52606d; stroke-width: 2; }
.column-edge { fill: none; stroke-width: 2.2; }
.column-edge.direct { stroke: var(--direct); }
.column-edge.indirect { stroke: var(--indirect); stroke-dasharray: 6 4; stroke-width: 1.6; }
.node { cursor: pointer; }
.node .box { stroke-width: 1.5; }
.node.dataset .box { fill: var(--dataset-fill); stroke: var(--dataset); }
.node.job .box { fill: var(--job-fill); stroke: var(--job); }
.node.job.failed .box { fill: var(--fail-fill); stroke: var(--fail); stroke-width: 2.5; }
.node.selected .box { stroke-width: 3; }
.node .label { font-size: 12px; font-weight: bold; fill: var(--ink); }
.node .sub { font-size: 10px; fill: #52606d; }
.node.job.failed .sub { fill: var(--fail); font-weight: bold; }
.node:focus { outline: none; }
.node:focus .box { stroke-width: 3; }
.column-row rect { fill: transparent; }
.column-row:hover rect { fill: #dde8f5; }
.column-row text { font-size: 11px; fill: var(--ink); }
.column-row .type { fill: #7b8794; }
.column-row.upstream rect { fill: #e3f2e5; }
.column-row.chosen rect { fill: #ffe98a; }
.divider { stroke: var(--dataset); stroke-opacity: 0.4; }
.filtered-out { opacity: 0.15; }
svg.focus .node:not(.on-path), svg.focus .edge:not(.on-path) { opacity: 0.3; }
#details { position: absolute; top: 10px; right: 10px; width: 340px; max-height: calc(100% - 20px); overflow: auto;
  background: rgba(255, 255, 255, 0.96); border: 1px solid #d5dbe3; border-radius: 6px; padding: 10px 12px;
  box-shadow: 0 2px 8px rgba(31, 41, 51, 0.12); }
#details h2 { font-size: 14px; margin: 0 22px 4px 0; overflow-wrap: anywhere; }
#details .close { position: absolute; top: 4px; right: 6px; border: none; background: none; font-size: 18px;
  line-height: 1; cursor: pointer; color: #52606d; }
#details[hidden] { display: none; }
#details h3 { font-size: 12px; margin: 10px 0 4px; text-transform: uppercase; color: #52606d; }
#details .muted { color: #7b8794; overflow-wrap: anywhere; }
#details ul { list-style: none; margin: 0; padding: 0; }
#details li { padding: 2px 0; overflow-wrap: anywhere; }
#details button.link { border: none; background: none; padding: 0; color: var(--dataset); cursor: pointer;
  font: inherit; text-align: left; }
#details .direct { color: var(--direct); }
#details .indirect { color: var(--indirect); }
.state { font-weight: bold; }
.state.failed { color: var(--fail); }
pre { white-space: pre-wrap; word-break: break-word; background: #f4f6f8; padding: 6px; border-radius: 4px;
  font: 11px/1.35 "DejaVu Sans Mono", monospace; max-height: 320px; overflow: auto; margin: 4px 0 0; }
#tooltip { position: absolute; z-index: 2; max-width: 460px; pointer-events: none; background: #fff;
  border: 1px solid #b8c2cc; border-radius: 6px; padding: 8px 10px; box-shadow: 0 4px 14px rgba(31, 41, 51, 0.2); }
#tooltip .error { color: var(--fail); }
"""

PAGE_SCRIPT = r"""
(function () {
  "use strict";
  var SVG_NS = "http://www.w3.org/2000/svg";
  var HEADER = 40, ROW = 18, ROW_PAD = 6, GAP = 18, CHAR = 7.2, SMALL_CHAR = 6.6, TYPE_CHARS = 14;
  var data = JSON.parse(document.getElementById("lineage-data").textContent);
  var svg = document.getElementById("graph");
  var viewport = document.getElementById("viewport");
  var edgeLayer = document.getElementById("edges");
  var columnLayer = document.getElementById("column-edges");
  var nodeLayer = document.getElementById("nodes");
  var details = document.getElementById("details");
  var tooltip = document.getElementById("tooltip");
  var search = document.getElementById("search");
  var indirectBox = document.getElementById("indirect");
  var summary = document.getElementById("summary");

  var nodes = new Map();
  var layers = [];
  var edges = [];
  var byField = new Map();
  var byDataset = new Map();
  var selection = null;
  var view = { x: 0, y: 0, k: 1 };

  function svgElement(name, attributes, parent) {
    var element = document.createElementNS(SVG_NS, name);
    Object.keys(attributes || {}).forEach(function (key) { element.setAttribute(key, attributes[key]); });
    if (parent) { parent.appendChild(element); }
    return element;
  }
  function htmlElement(name, text, className, parent) {
    var element = document.createElement(name);
    if (text !== undefined && text !== null) { element.textContent = text; }
    if (className) { element.className = className; }
    if (parent) { parent.appendChild(element); }
    return element;
  }
  function cut(text, width, charWidth) {
    var room = Math.max(4, Math.floor(width / (charWidth || CHAR)));
    return text.length > room ? text.slice(0, room - 1) + "\u2026" : text;
  }
  function fieldKey(nodeId, field) { return nodeId + "\u0000" + field; }
  function columnName(dataset, field) { return field === null ? dataset + " (every column)" : dataset + "." + field; }
  function plural(count, word) { return count + " " + word + (count === 1 ? "" : "s"); }

  // ---- nodes and edges, built from the embedded JSON
  data.nodes.forEach(function (item) {
    var node = { item: item, y: item.y, height: item.height, expanded: false, rows: null, element: null };
    nodes.set(item.id, node);
    (layers[item.layer] = layers[item.layer] || []).push(node);
  });
  layers.forEach(function (layer) { layer.sort(function (a, b) { return a.item.y - b.item.y; }); });
  data.columnEdges.forEach(function (edge) {
    var index = edge.targetField === null ? byDataset : byField;
    var key = edge.targetField === null ? edge.target : fieldKey(edge.target, edge.targetField);
    if (!index.has(key)) { index.set(key, []); }
    index.get(key).push(edge);
  });

  function drawNode(node) {
    var item = node.item;
    var classes = "node " + item.kind + (item.failed ? " failed" : "");
    var group = svgElement("g", { "class": classes, "data-node-id": item.id, tabindex: "0", role: "button" },
      nodeLayer);
    svgElement("rect", { "class": "box", width: item.width, height: item.height,
      rx: item.kind === "job" ? 18 : 5 }, group);
    var label = svgElement("text", { "class": "label", x: 12, y: 17 }, group);
    label.textContent = cut(item.name, item.width - 24);
    var sub = svgElement("text", { "class": "sub", x: 12, y: 32 }, group);
    var title = svgElement("title", {}, group);
    if (item.kind === "dataset") {
      sub.textContent = plural(item.columns.length, "column") + (item.columns.length ? "  \u25b8" : "");
      title.textContent = item.namespace + " / " + item.name;
      group.addEventListener("click", function (event) { event.stopPropagation(); toggleDataset(node); });
    } else {
      sub.textContent = (item.failed ? "\u26a0 " : "") + (item.state || "no state") + " \u00b7 " +
        plural(item.runs, "run") + (item.failedRuns && !item.failed ? " (" + item.failedRuns + " failed)" : "");
      title.textContent = item.namespace + " / " + item.name;
      group.addEventListener("mouseenter", function (event) { showJobTip(item, event); });
      group.addEventListener("mousemove", function (event) { placeTip(event); });
      group.addEventListener("mouseleave", function () { tooltip.hidden = true; });
      group.addEventListener("click", function (event) { event.stopPropagation(); showJob(item); });
    }
    group.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        group.dispatchEvent(new MouseEvent("click"));
      }
    });
    node.element = group;
    node.sub = sub;
  }

  function drawRows(node) {
    var item = node.item;
    node.rows = new Map();
    var box = svgElement("g", { "class": "columns" }, node.element);
    svgElement("line", { "class": "divider", x1: 0, y1: HEADER, x2: item.width, y2: HEADER }, box);
    item.columns.forEach(function (column, index) {
      var row = svgElement("g", { "class": "column-row", "data-column": column.name,
        transform: "translate(0," + (HEADER + index * ROW) + ")" }, box);
      svgElement("rect", { x: 1, y: 0, width: item.width - 2, height: ROW }, row);
      var typeWidth = column.type ? Math.min(column.type.length, TYPE_CHARS) * SMALL_CHAR + 10 : 0;
      svgElement("text", { x: 12, y: 13 }, row).textContent = cut(column.name, item.width - 24 - typeWidth, SMALL_CHAR);
      if (column.type) {
        var type = svgElement("text", { "class": "type", x: item.width - 8, y: 13, "text-anchor": "end" }, row);
        type.textContent = cut(column.type, TYPE_CHARS * SMALL_CHAR, SMALL_CHAR);
      }
      row.addEventListener("click", function (event) {
        event.stopPropagation();
        selectColumn(item.id, column.name, true);
      });
      node.rows.set(column.name, row);
    });
    box.style.display = "none";
    node.columnsBox = box;
  }

  function setExpanded(node, expanded) {
    if (node.item.kind !== "dataset" || !node.item.columns.length || node.expanded === expanded) { return; }
    if (!node.rows) { drawRows(node); }
    node.expanded = expanded;
    node.columnsBox.style.display = expanded ? "" : "none";
    node.height = expanded ? HEADER + node.item.columns.length * ROW + ROW_PAD : node.item.height;
    node.element.querySelector(".box").setAttribute("height", node.height);
    node.sub.textContent = plural(node.item.columns.length, "column") + (expanded ? "  \u25be" : "  \u25b8");
  }

  // ---- placement: the layout from Python, nodes pushed down only where an open dataset needs room
  function reflow() {
    layers.forEach(function (layer) {
      var bottom = -Infinity;
      layer.forEach(function (node) {
        node.y = Math.max(node.item.y, bottom);
        bottom = node.y + node.height + GAP;
        node.element.setAttribute("transform", "translate(" + node.item.x + "," + node.y + ")");
      });
    });
    edges.forEach(function (edge) { edge.path.setAttribute("d", curve(rightOf(edge.source), leftOf(edge.target))); });
    if (selection && selection.field) { drawColumnEdges(); }
  }
  function rightOf(node) { return [node.item.x + node.item.width, node.y + node.item.height / 2]; }
  function leftOf(node) { return [node.item.x, node.y + node.item.height / 2]; }
  function point(at) { return at[0] + "," + at[1]; }
  function bezier(from, to) {
    var bend = Math.max(40, Math.abs(to[0] - from[0]) / 2);
    return " C" + point([from[0] + bend, from[1]]) + " " + point([to[0] - bend, to[1]]) + " " + point(to);
  }
  function curve(from, to) { return "M" + point(from) + bezier(from, to); }
  function rowAnchor(node, field, side) {
    var index = node.item.columns.findIndex(function (column) { return column.name === field; });
    var y = index < 0 ? node.y + node.item.height / 2 : node.y + HEADER + index * ROW + ROW / 2;
    return [side === "right" ? node.item.x + node.item.width : node.item.x, y];
  }

  data.edges.forEach(function (item) {
    var source = nodes.get(item.source), target = nodes.get(item.target);
    if (!source || !target) { return; }
    var failed = (source.item.kind === "job" ? source : target).item.failed;
    var path = svgElement("path", { "class": "edge" + (failed ? " failed" : ""), "marker-end": "url(#arrow)",
      "data-source": item.source, "data-target": item.target }, edgeLayer);
    edges.push({ source: source, target: target, path: path });
  });
  nodes.forEach(drawNode);

  // ---- column lineage: everything a column comes from, across jobs
  function upstream(nodeId, field) {
    var seen = new Set([fieldKey(nodeId, field)]);
    var queue = [[nodeId, field]];
    var found = [];
    while (queue.length) {
      var next = queue.shift();
      var own = byField.get(fieldKey(next[0], next[1])) || [];
      var shared = indirectBox.checked ? byDataset.get(next[0]) || [] : [];
      own.concat(shared).forEach(function (edge) {
        if (!indirectBox.checked && edge.type !== "DIRECT") { return; }
        // A dataset-wide input shapes every column: it is drawn once, to the dataset itself.
        found.push({ edge: edge, targetField: edge.targetField === null ? null : next[1] });
        var key = fieldKey(edge.source, edge.sourceField);
        if (!seen.has(key)) { seen.add(key); queue.push([edge.source, edge.sourceField]); }
      });
    }
    return found;
  }

  // One drawn line per source column, target column and job; DIRECT wins when both kinds link them.
  function mergeLinks(found) {
    var merged = new Map();
    found.forEach(function (link) {
      var edge = link.edge;
      var key = [edge.source, edge.sourceField, edge.target, link.targetField, edge.job].join("\u0000");
      var entry = merged.get(key);
      if (!entry) {
        entry = { edge: edge, targetField: link.targetField, direct: false, kinds: [] };
        merged.set(key, entry);
      }
      entry.direct = entry.direct || edge.type === "DIRECT";
      var kind = edge.type + " " + edge.subtype + (edge.masking ? " masking" : "");
      if (entry.kinds.indexOf(kind) < 0) { entry.kinds.push(kind); }
    });
    return Array.from(merged.values());
  }

  function drawColumnEdges() {
    while (columnLayer.firstChild) { columnLayer.removeChild(columnLayer.firstChild); }
    selection.links.forEach(function (link) {
      var edge = link.edge, source = nodes.get(edge.source), target = nodes.get(edge.target), job = nodes.get(edge.job);
      if (!source || !target) { return; }
      var from = rowAnchor(source, edge.sourceField, "right"), to = rowAnchor(target, link.targetField, "left");
      var d = curve(from, to);
      if (target.item.x === source.item.x) {
        // Written and read inside one job (a temp table): both in one layer, so link their right sides.
        to = rowAnchor(target, link.targetField, "right");
        var reach = Math.max(from[0], to[0]) + 50;
        d = "M" + point(from) + " C" + point([reach, from[1]]) + " " + point([reach, to[1]]) + " " + point(to);
      } else if (job && job.item.x > from[0] && job.item.x + job.item.width < to[0]) {
        // Through the job that made the link: in at its left, out at its right (hidden under the node).
        var middle = job.y + job.item.height / 2;
        var into = [job.item.x, middle], out = [job.item.x + job.item.width, middle];
        d = "M" + point(from) + bezier(from, into) + " L" + point(out) + bezier(out, to);
      }
      var path = svgElement("path", { "class": "column-edge " + (link.direct ? "direct" : "indirect"), d: d,
        "data-source": edge.source, "data-source-field": edge.sourceField, "data-target": edge.target,
        "data-target-field": link.targetField === null ? "" : link.targetField, "data-job": edge.job },
        columnLayer);
      svgElement("title", {}, path).textContent = source.item.name + "." + edge.sourceField + " \u2192 " +
        columnName(target.item.name, link.targetField) + ": " + link.kinds.join(", ") +
        " (job " + (job ? job.item.name : edge.job) + ")";
    });
  }

  function clearSelection() {
    selection = null;
    while (columnLayer.firstChild) { columnLayer.removeChild(columnLayer.firstChild); }
    svg.classList.remove("focus");
    var marked = document.querySelectorAll(".on-path, .selected, .column-row.upstream, .column-row.chosen");
    marked.forEach(function (element) { element.classList.remove("on-path", "selected", "upstream", "chosen"); });
  }

  function selectColumn(nodeId, field, updateAddress) {
    var node = nodes.get(nodeId);
    if (!node) { return; }
    clearSelection();
    var links = mergeLinks(upstream(nodeId, field));
    selection = { node: node, field: field, links: links };
    setExpanded(node, true);
    var onPath = new Set([nodeId]);
    links.forEach(function (link) {
      [link.edge.source, link.edge.target, link.edge.job].forEach(function (id) { onPath.add(id); });
      setExpanded(nodes.get(link.edge.source) || node, true);
      setExpanded(nodes.get(link.edge.target) || node, true);
    });
    reflow();
    onPath.forEach(function (id) { var n = nodes.get(id); if (n) { n.element.classList.add("on-path"); } });
    edges.forEach(function (edge) {
      if (onPath.has(edge.source.item.id) && onPath.has(edge.target.item.id)) { edge.path.classList.add("on-path"); }
    });
    svg.classList.add("focus");
    node.element.classList.add("selected");
    node.rows.get(field) && node.rows.get(field).classList.add("chosen");
    links.forEach(function (link) {
      var source = nodes.get(link.edge.source);
      var row = source && source.rows && source.rows.get(link.edge.sourceField);
      if (row) { row.classList.add("upstream"); }
    });
    showColumn(node, field, links);
    if (updateAddress) { setAddress({ dataset: node.item.name, column: field }); }
  }

  function toggleDataset(node) {
    var open = !node.expanded;
    if (selection && selection.field && !open) { clearSelection(); }
    setExpanded(node, open);
    reflow();
    document.querySelectorAll(".node.selected").forEach(function (element) { element.classList.remove("selected"); });
    node.element.classList.add("selected");
    showDataset(node.item);
  }

  // ---- the side panel and the job tooltip
  function panel() {
    while (details.firstChild) { details.removeChild(details.firstChild); }
    details.hidden = false;
    var close = htmlElement("button", "\u00d7", "close", details);
    close.type = "button";
    close.title = "Hide this panel";
    close.addEventListener("click", function () { details.hidden = true; });
    return details;
  }
  function neighbours(id, incoming) {
    return data.edges.filter(function (edge) { return (incoming ? edge.target : edge.source) === id; })
      .map(function (edge) { return nodes.get(incoming ? edge.source : edge.target); }).filter(Boolean);
  }
  function nodeLinks(title, list, parent) {
    if (!list.length) { return; }
    htmlElement("h3", title, null, parent);
    var ul = htmlElement("ul", null, null, parent);
    list.forEach(function (node) {
      var li = htmlElement("li", null, null, ul);
      var button = htmlElement("button", node.item.name, "link", li);
      button.type = "button";
      button.addEventListener("click", function () {
        focusNode(node);
        node.element.dispatchEvent(new MouseEvent("click"));
      });
    });
  }
  function showHelp() {
    var box = panel();
    htmlElement("h2", data.title, null, box);
    var jobs = data.nodes.filter(function (n) { return n.kind === "job"; });
    var failed = jobs.filter(function (n) { return n.failed; });
    var counts = plural(data.nodes.length - jobs.length, "dataset") + ", " + plural(jobs.length, "job") + ", " +
      plural(data.columnEdges.length, "column edge") + (failed.length ? "; " + failed.length + " failed" : "");
    htmlElement("p", counts + ".", null, box);
    htmlElement("p", "Click a dataset for its columns, a column for where it comes from " +
      "(DIRECT solid, INDIRECT dashed). Hover a job for its SQL. Drag to pan, scroll to zoom.", "muted", box);
    nodeLinks("Failed jobs", failed.map(function (n) { return nodes.get(n.id); }), box);
  }
  function showDataset(item) {
    var box = panel();
    htmlElement("h2", item.name, null, box);
    htmlElement("div", item.namespace, "muted", box);
    htmlElement("h3", plural(item.columns.length, "column"), null, box);
    var ul = htmlElement("ul", null, null, box);
    item.columns.forEach(function (column) {
      var li = htmlElement("li", null, null, ul);
      var button = htmlElement("button", column.name, "link", li);
      button.type = "button";
      button.addEventListener("click", function () { selectColumn(item.id, column.name, true); });
      if (column.type) { htmlElement("span", " " + column.type, "muted", li); }
    });
    nodeLinks("Written by", neighbours(item.id, true), box);
    nodeLinks("Read by", neighbours(item.id, false), box);
  }
  function showColumn(node, field, links) {
    var box = panel();
    htmlElement("h2", node.item.name + "." + field, null, box);
    htmlElement("div", node.item.namespace, "muted", box);
    htmlElement("h3", links.length ? "Comes from" : "No upstream columns known", null, box);
    var ul = htmlElement("ul", null, null, box);
    links.forEach(function (link) {
      var source = nodes.get(link.edge.source), target = nodes.get(link.edge.target), job = nodes.get(link.edge.job);
      var li = htmlElement("li", null, "upstream-link", ul);
      htmlElement("span", (source ? source.item.name : link.edge.source) + "." + link.edge.sourceField, null, li);
      var targetName = target ? target.item.name : link.edge.target;
      htmlElement("span", " \u2192 " + columnName(targetName, link.targetField) + " ", null, li);
      htmlElement("span", link.kinds.join(", "), link.direct ? "direct" : "indirect", li);
      htmlElement("div", "via " + (job ? job.item.name : link.edge.job), "muted", li);
    });
  }
  function jobFacts(item, parent) {
    var state = htmlElement("div", null, null, parent);
    htmlElement("span", item.state || "no state", "state" + (item.failed ? " failed" : ""), state);
    var runs = plural(item.runs, "run") + (item.failedRuns ? ", " + item.failedRuns + " failed" : "");
    htmlElement("span", " \u00b7 " + runs + (item.eventTime ? " \u00b7 " + item.eventTime : ""), "muted", state);
    if (item.error) { htmlElement("div", item.error, "error", parent); }
    if (item.sql) { htmlElement("pre", item.sql, null, parent); }
  }
  function showJob(item) {
    var box = panel();
    htmlElement("h2", item.name, null, box);
    htmlElement("div", item.namespace + (item.runId ? " \u00b7 run " + item.runId : ""), "muted", box);
    jobFacts(item, box);
    nodeLinks("Reads", neighbours(item.id, true), box);
    nodeLinks("Writes", neighbours(item.id, false), box);
  }
  function showJobTip(item, event) {
    while (tooltip.firstChild) { tooltip.removeChild(tooltip.firstChild); }
    htmlElement("strong", item.name, null, tooltip);
    var facts = { state: item.state, failed: item.failed, runs: item.runs, failedRuns: item.failedRuns,
      eventTime: item.eventTime, error: item.error,
      sql: item.sql && item.sql.length > 1500 ? item.sql.slice(0, 1500) + "\n\u2026" : item.sql };
    jobFacts(facts, tooltip);
    tooltip.hidden = false;
    placeTip(event);
  }
  function placeTip(event) {
    var area = svg.getBoundingClientRect();
    var left = event.clientX - area.left + 14, top = event.clientY - area.top + 14;
    tooltip.style.left = Math.max(0, Math.min(left, area.width - tooltip.offsetWidth - 4)) + "px";
    tooltip.style.top = Math.max(0, Math.min(top, area.height - tooltip.offsetHeight - 4)) + "px";
  }

  // ---- search
  function applySearch() {
    var query = search.value.trim().toLowerCase();
    var shown = 0;
    nodes.forEach(function (node) {
      var match = !query || node.item.name.toLowerCase().indexOf(query) >= 0 ||
        node.item.namespace.toLowerCase().indexOf(query) >= 0;
      node.matches = match;
      node.element.classList.toggle("filtered-out", !match);
      if (match) { shown += 1; }
    });
    edges.forEach(function (edge) {
      edge.path.classList.toggle("filtered-out", !(edge.source.matches && edge.target.matches));
    });
    summary.textContent = query ? shown + " of " + plural(nodes.size, "node") + " match" :
      plural(nodes.size, "node") + ", " + plural(edges.length, "edge");
  }
  search.addEventListener("input", function () {
    applySearch();
    setAddress(search.value ? { search: search.value } : {});
  });
  search.addEventListener("keydown", function (event) {
    if (event.key === "Escape") { search.value = ""; applySearch(); setAddress({}); }
    if (event.key === "Enter") {
      var first = Array.from(nodes.values()).find(function (node) { return node.matches; });
      if (first) { focusNode(first); }
    }
  });
  indirectBox.addEventListener("change", function () {
    if (selection && selection.field) { selectColumn(selection.node.item.id, selection.field, false); }
  });

  // ---- pan and zoom
  function applyView() {
    viewport.setAttribute("transform", "translate(" + view.x + "," + view.y + ") scale(" + view.k + ")");
  }
  function bounds() {
    var box = { left: Infinity, top: Infinity, right: -Infinity, bottom: -Infinity };
    nodes.forEach(function (node) {
      box.left = Math.min(box.left, node.item.x);
      box.top = Math.min(box.top, node.y);
      box.right = Math.max(box.right, node.item.x + node.item.width);
      box.bottom = Math.max(box.bottom, node.y + node.height);
    });
    return box;
  }
  function fit() {
    var area = svg.getBoundingClientRect();
    if (!nodes.size || !area.width || !area.height) { return; }
    var box = bounds(), pad = 20;
    // Leave the panel its room on the right while there is enough left for the graph.
    var room = details.hidden || area.width < 900 ? area.width : area.width - details.offsetWidth - 20;
    var wide = box.right - box.left, high = box.bottom - box.top;
    var k = Math.min((room - 2 * pad) / wide, (area.height - 2 * pad) / high, 1.4);
    view.k = Math.max(0.15, k);
    view.x = (room - wide * view.k) / 2 - box.left * view.k;
    view.y = Math.max(pad, (area.height - (box.bottom - box.top) * view.k) / 2) - box.top * view.k;
    applyView();
  }
  function focusNode(node) {
    var area = svg.getBoundingClientRect();
    view.k = Math.max(view.k, 0.8);
    view.x = area.width / 2 - (node.item.x + node.item.width / 2) * view.k;
    view.y = area.height / 2 - (node.y + node.height / 2) * view.k;
    applyView();
    node.element.focus({ preventScroll: true });
  }
  svg.addEventListener("wheel", function (event) {
    event.preventDefault();
    var area = svg.getBoundingClientRect();
    var k = Math.min(4, Math.max(0.1, view.k * Math.exp(-event.deltaY * 0.0015)));
    var mx = event.clientX - area.left, my = event.clientY - area.top;
    view.x = mx - (mx - view.x) * (k / view.k);
    view.y = my - (my - view.y) * (k / view.k);
    view.k = k;
    applyView();
  }, { passive: false });
  var drag = null;
  svg.addEventListener("pointerdown", function (event) {
    if (event.target.closest && event.target.closest(".node")) { return; }
    drag = { x: event.clientX, y: event.clientY, moved: false };
    svg.setPointerCapture(event.pointerId);
  });
  svg.addEventListener("pointermove", function (event) {
    if (!drag) { return; }
    var dx = event.clientX - drag.x, dy = event.clientY - drag.y;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 3) { return; }
    drag.moved = true;
    svg.classList.add("panning");
    view.x += dx; view.y += dy;
    drag.x = event.clientX; drag.y = event.clientY;
    applyView();
  });
  svg.addEventListener("pointerup", function () {
    if (drag && !drag.moved) { clearSelection(); showHelp(); setAddress({}); }
    drag = null;
    svg.classList.remove("panning");
  });
  document.getElementById("fit").addEventListener("click", fit);

  // ---- the address: #dataset=NAME&column=FIELD selects a column, #search=TEXT filters
  function setAddress(params) {
    var text = new URLSearchParams(params).toString();
    try {
      history.replaceState(null, "", text ? "#" + text : location.pathname + location.search);
    } catch (ignored) { /* a browser may refuse it for file: pages; the address is only a convenience */ }
  }
  function findDataset(name) {
    var found = nodes.get(name);
    if (found) { return found; }
    return Array.from(nodes.values()).find(function (node) {
      return node.item.kind === "dataset" && node.item.name === name;
    });
  }
  function fromAddress() {
    var params = new URLSearchParams(location.hash.replace(/^#/, ""));
    if (params.get("search")) { search.value = params.get("search"); }
    applySearch();
    var dataset = params.get("dataset") && findDataset(params.get("dataset"));
    if (dataset && params.get("column")) {
      selectColumn(dataset.item.id, params.get("column"), false);
    } else if (dataset) {
      toggleDataset(dataset);
    } else {
      showHelp();
    }
  }

  reflow();
  fromAddress();
  fit();
  window.addEventListener("resize", fit);
  document.body.setAttribute("data-rendered", String(nodes.size));
})();
"""
