"""``lineage.html``: one self-contained page that draws OpenLineage RunEvents as an interactive graph.

The graph has one node per dataset (namespace + name, labelled ``database.table``: the catalog prefix is
left to the details) and one per job, with edges input dataset -> job -> output dataset, merged across runs.
A job shows the state of its latest run (a FAIL or ABORT is marked, one a data quality check blocked apart)
and its SQL. A job named in other runs' ``parent`` facet that reads and writes nothing is a group: the page
draws it as a box around those jobs and the datasets only they write (``Grouping``). Column-level edges
come from the ``columnLineage`` facets of COMPLETE events, as in ``lineage.viewer.column_graph``: only a
finished run says what was written. Events are read by ``lineage.openlineage.reader``, the reader
``lineage.viewer.column_graph`` uses too.

Python builds the graph document (nodes, edges, column edges, run states) and puts it, as JSON, into one
page together with the page's own files (``assets/``: the HTML template, ``viewer.css``, ``viewer.js``)
and the graph layout library (``assets/vendor/dagre.min.js``, from ``@dagrejs/dagre`` in package.json).
The script measures the nodes and lets dagre lay them out in the browser, left to right or top to bottom
(whichever shows the whole graph larger); every size and gap of the drawing is in ``viewer.js``. The page's
Content-Security-Policy forbids every request (its style and scripts are allowed by hash), so it opens the
same offline as online.

A dataset whose latest checks (#41: the ``dataQualityAssertions`` input facet of the checks' run's COMPLETE or FAIL
event, ``stage_lineage.events``) had a rule fail is marked, the caption under its name counts the failed rules and
its details panel lists every rule with its verdict, severity and metric. The checks' job itself (a job that
only reads what it checks) is not drawn: its dataset carries what it found, and its parent's box its failure.

In the page: click a dataset to show its columns (and its checks), click a column to highlight where it comes from
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
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from lakeline.errors import InvalidInputError
from lakeline.lineage.columns.model import Transformation
from lakeline.lineage.openlineage.reader import (
    FAILED_STATES,
    EventDataset,
    InputField,
    RunEventView,
    read_run_event,
    with_parts,
)

CATALOG_PREFIX = "AwsDataCatalog."
"""Athena's catalog in a dataset's name (the naming spec's ``catalog.database.table``): the label leaves it out."""
_BLOCKED = re.compile(r"\bQualityBlocked\b")
"""A run a failed ``block`` check stopped (``stage_end.quality``'s error), not one whose check crashed."""

DEFAULT_TITLE = "Lakeline lineage"

ASSETS = "assets"
TEMPLATE = "page.html"
STYLE = "viewer.css"
SCRIPTS = ("vendor/dagre.min.js", "viewer.js")
"""Inlined in this order: the layout library first, then the page's script that uses it."""
VENDORED = {"vendor/dagre.min.js": "@dagrejs/dagre/dist/dagre.min.js"}
"""Each vendored asset and the file of ``node_modules/`` it is a copy of (a test keeps them equal)."""


@dataclass(frozen=True)
class DatasetColumn:
    name: str
    type: str | None = None


@dataclass(frozen=True)
class CheckVerdict:
    """One rule's result in the checks of a dataset's version (an assertion of ``dataQualityAssertions``)."""

    rule: str
    success: bool
    severity: str | None = None
    column: str | None = None
    actual: str | None = None


@dataclass
class DatasetNode:
    id: str
    namespace: str
    name: str
    columns: dict[str, DatasetColumn] = field(default_factory=dict)
    checks: tuple[CheckVerdict, ...] = ()
    """The latest checks on it (of the checks' run that ended last)."""
    checks_time: datetime | None = None

    @property
    def failed_checks(self) -> list[str]:
        return [check.rule for check in self.checks if not check.success]

    def add_column(self, name: str, kind: str | None) -> None:
        known = self.columns.get(name)
        if known is None or (kind and not known.type):
            self.columns[name] = DatasetColumn(name, kind or (known.type if known else None))


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
    parent: str | None = None
    """The job named by the latest run's ``parent`` facet (its id), if any."""

    @property
    def failed(self) -> bool:
        return self.state in FAILED_STATES

    @property
    def blocked(self) -> bool:
        """A failed run whose message says a data quality check stopped it (nothing was published)."""
        return self.failed and self.error is not None and _BLOCKED.search(self.error) is not None


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

    def grouping(self) -> Grouping:
        """Which jobs are groups and the innermost group each node is drawn in."""
        linked = {node for edge in self.edges for node in edge}
        groups = frozenset(job.parent for job in self.jobs.values() if job.parent is not None) - linked
        of: dict[str, str | None] = {job.id: job.parent if job.parent in groups else None for job in self.jobs.values()}
        writers: dict[str, list[str]] = {}
        for source, target in self.edges:
            if target in self.datasets:
                writers.setdefault(target, []).append(source)
        for dataset in self.datasets:
            # The innermost group around every job that writes it.
            chains = [_chain(of, writer) for writer in writers.get(dataset, [])]
            common = [group for group in chains[0] if all(group in chain for chain in chains[1:])] if chains else []
            of[dataset] = common[0] if common else None
        return Grouping(groups, of)

    @property
    def groups(self) -> frozenset[str]:
        return self.grouping().groups

    def group_of(self, node_id: str) -> str | None:
        return self.grouping().of[node_id]

    def display_label(self, node_id: str) -> str:
        return self.grouping().label(self, node_id)


def _chain(of: Mapping[str, str | None], job: str) -> list[str]:
    """The groups a job is drawn in, innermost first."""
    around: list[str] = []
    group = of[job]
    while group is not None and group not in around:  # a parent cycle ends at the first repeat
        around.append(group)
        group = of[group]
    return around


@dataclass(frozen=True)
class Grouping:
    """Parent jobs drawn as boxes: a job named in other runs' ``parent`` facet that reads and writes nothing."""

    groups: frozenset[str]
    of: Mapping[str, str | None]
    """The innermost group of each node: a job's parent; a dataset's, the one around all its writers."""

    def label(self, graph: LineageGraph, node_id: str) -> str:
        """The name in the node: ``database.table``; a job without its group's name in front."""
        if node_id in graph.datasets:
            return graph.datasets[node_id].name.removeprefix(CATALOG_PREFIX)
        name = graph.jobs[node_id].name
        group = self.of[node_id]
        prefix = f"{graph.jobs[group].name}." if group is not None else ""
        return name.removeprefix(prefix) if name != prefix else name


def dataset_id(namespace: str, name: str) -> str:
    return f"dataset:{namespace}/{name}"


def job_id(namespace: str, name: str) -> str:
    return f"job:{namespace}/{name}"


# ---------------------------------------------------------------------------------------------- events


@dataclass(frozen=True)
class _Event:
    index: int
    read: RunEventView
    time: datetime
    job: str

    @property
    def order(self) -> tuple[datetime, int]:
        """Time order; the file's order among equal times."""
        return (self.time, self.index)


def _event(index: int, data: Any) -> _Event:
    read = read_run_event(data, f"event {index + 1}")
    if read.time is None:
        raise InvalidInputError(f"{read.where} eventTime must be a non-empty string, not None")
    return _Event(index, read, read.time, job_id(read.job.namespace, read.job.name))


def _checked(data: Mapping[str, Any]) -> list[tuple[str, str, tuple[CheckVerdict, ...]]]:
    """Each input the event's run checked, with its verdicts (its ``dataQualityAssertions`` input facet)."""
    found = []
    inputs = data.get("inputs")
    for raw in inputs if isinstance(inputs, list) else []:
        facets = raw.get("inputFacets") if isinstance(raw, Mapping) else None
        facet = facets.get("dataQualityAssertions") if isinstance(facets, Mapping) else None
        assertions = facet.get("assertions") if isinstance(facet, Mapping) else None
        if not isinstance(assertions, list) or not isinstance(raw.get("namespace"), str):
            continue
        verdicts = tuple(_verdict(item) for item in assertions if isinstance(item, Mapping))
        found.append((raw["namespace"], str(raw.get("name")), verdicts))
    return found


def _checks_jobs(events: list[_Event]) -> set[str]:
    """The jobs that check datasets (#41): some event of theirs carries results on an input, none writes."""
    checked = {event.job for event in events if _checked(event.read.data)}
    return checked - {event.job for event in events if event.read.outputs}


def _verdict(item: Mapping[str, Any]) -> CheckVerdict:
    def text(key: str) -> str | None:
        value = item.get(key)
        return value if isinstance(value, str) else None

    # The rule as written (Lakeline's content), else the spec's name or its classification.
    rule = text("content") or text("name") or text("assertion") or "?"
    return CheckVerdict(rule, item.get("success") is True, text("severity"), text("column"), text("actual"))


def _parent_job(event: _Event) -> tuple[str, str] | None:
    """The (namespace, name) of the job in the event's ``parent`` run facet, if it names one."""
    run = event.read.data.get("run")
    facets = run.get("facets") if isinstance(run, Mapping) else None
    parent = facets.get("parent") if isinstance(facets, Mapping) else None
    job = parent.get("job") if isinstance(parent, Mapping) else None
    if not isinstance(job, Mapping):
        return None
    namespace, name = job.get("namespace"), job.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str) or not namespace or not name:
        return None
    return namespace, name


class _GraphBuilder:
    def __init__(self) -> None:
        self.graph = LineageGraph()

    def dataset(self, namespace: str, name: str) -> DatasetNode:
        key = dataset_id(namespace, name)
        node = self.graph.datasets.get(key)
        if node is None:
            node = self.graph.datasets[key] = DatasetNode(key, namespace, name)
        return node

    def _with_schema(self, raw: EventDataset) -> DatasetNode:
        node = self.dataset(raw.namespace, raw.name)
        for column in raw.schema:
            node.add_column(column.name, column.type)
        return node

    def add(self, event: _Event) -> None:
        if event.job not in self.graph.jobs:
            self.graph.jobs[event.job] = JobNode(event.job, event.read.job.namespace, event.read.job.name)
        for raw in event.read.inputs:
            self.graph.edges.add((self._with_schema(raw).id, event.job))
        if event.read.state in ("COMPLETE", "FAIL"):
            for namespace, name, verdicts in _checked(event.read.data):
                node = self.dataset(namespace, name)
                if node.checks_time is None or node.checks_time <= event.time:
                    node.checks, node.checks_time = verdicts, event.time
        for raw in event.read.outputs:
            node = self._with_schema(raw)
            self.graph.edges.add((event.job, node.id))
            if event.read.state == "COMPLETE" and raw.column_lineage is not None:
                for name, inputs in raw.column_lineage.fields:
                    node.add_column(name, None)
                    self._column_edges(node, name, event.job, inputs)
                self._column_edges(node, None, event.job, raw.column_lineage.dataset)

    def _column_edges(
        self, node: DatasetNode, target_field: str | None, job: str, inputs: Iterable[InputField]
    ) -> None:
        for item in inputs:
            source = self.dataset(item.namespace, item.name)
            source.add_column(item.field, None)
            for transformation in item.transformations:
                self.graph.column_edges.add(
                    ColumnEdge(source.id, item.field, node.id, target_field, job, transformation)
                )

    def finish(self, events: list[_Event]) -> LineageGraph:
        checks = _checks_jobs(events)
        events = [event for event in events if event.job not in checks]
        self.graph.edges = {(s, t) for s, t in self.graph.edges if s not in checks and t not in checks}
        for checker in checks:
            del self.graph.jobs[checker]
        runs: dict[str, dict[str, list[_Event]]] = {}
        for event in events:
            runs.setdefault(event.job, {}).setdefault(event.read.run_id or f"#{event.index}", []).append(event)
        for key, by_run in runs.items():
            job = self.graph.jobs[key]
            latest = {run: max(items, key=lambda e: e.order) for run, items in by_run.items()}
            last = max(latest.values(), key=lambda e: e.order)
            job.state, job.event_time, job.run_id = last.read.state, last.time.isoformat(), last.read.run_id
            job.runs = len(latest)
            job.failed_runs = sum(1 for event in latest.values() if event.read.failed)
            # The latest SQL any event of the job says (a FAIL event may not repeat it).
            for event in sorted((e for items in by_run.values() for e in items), key=lambda e: e.order):
                if event.read.sql:
                    job.sql, job.dialect = event.read.sql, event.read.dialect
            job.error = last.read.error if job.failed else None
        self._parents(events)
        return self.graph

    def _parents(self, events: list[_Event]) -> None:
        # The latest event that names a parent wins; a parent with no events of its own is still a job.
        for event in sorted(events, key=lambda e: e.order):
            named = _parent_job(event)
            if named is None or job_id(*named) == event.job:
                continue
            parent = job_id(*named)
            if parent not in self.graph.jobs:
                self.graph.jobs[parent] = JobNode(parent, *named)
            if not self._above(event.job, parent):  # a parent cycle would nest a box in itself
                self.graph.jobs[event.job].parent = parent

    def _above(self, job: str, start: str) -> bool:
        """Whether ``job`` is ``start`` or one of its parents."""
        seen: set[str] = set()
        at: str | None = start
        while at is not None and at not in seen:
            if at == job:
                return True
            seen.add(at)
            at = self.graph.jobs[at].parent
        return False


def build_lineage_graph(events: Iterable[Mapping[str, Any]]) -> LineageGraph:
    """The datasets, jobs and edges that ``events`` describe, merged across runs."""
    read = [_event(index, data) for index, data in enumerate(with_parts(events))]
    builder = _GraphBuilder()
    for event in read:
        builder.add(event)
    return builder.finish(read)


# ---------------------------------------------------------------------------------------------- page


def graph_document(graph: LineageGraph, *, title: str = DEFAULT_TITLE) -> dict[str, Any]:
    """The JSON the page draws: nodes (by name: the layout's input order), dataset edges and column edges."""
    nodes: list[dict[str, Any]] = []
    grouping = graph.grouping()
    for node_id in sorted(graph.node_ids, key=lambda n: (graph.label(n), n)):
        item: dict[str, Any] = {
            "id": node_id,
            "label": grouping.label(graph, node_id),
            "parent": grouping.of[node_id],
            "group": node_id in grouping.groups,
        }
        if node_id in graph.datasets:
            dataset = graph.datasets[node_id]
            item |= {
                "kind": "dataset",
                "namespace": dataset.namespace,
                "name": dataset.name,
                "columns": [{"name": c.name, "type": c.type} for c in dataset.columns.values()],
                "checks": [
                    {
                        "rule": c.rule,
                        "success": c.success,
                        "severity": c.severity,
                        "column": c.column,
                        "actual": c.actual,
                    }
                    for c in dataset.checks
                ],
                "failedChecks": dataset.failed_checks,
            }
        else:
            job = graph.jobs[node_id]
            item |= {
                "kind": "job",
                "namespace": job.namespace,
                "name": job.name,
                "state": job.state,
                "failed": job.failed,
                "blocked": job.blocked,
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


@cache
def _asset(name: str) -> str:
    """One file of ``assets/``, as shipped in the package (package data)."""
    return resources.files(__package__).joinpath(ASSETS, name).read_text(encoding="utf-8")


_BREAKS_OUT = re.compile(r"</script|<!--|<script", re.IGNORECASE)
_SLOT = re.compile(r"\{\{(\w+)\}\}")


def _inline_script(name: str) -> str:
    source = _asset(name)
    # Inside <script> these would end the element early or change how the parser reads it.
    if _BREAKS_OUT.search(source):
        raise InvalidInputError(f"asset {name} cannot be inlined in a <script> element: it holds {_BREAKS_OUT.pattern}")
    return source


def render_lineage_html(events: Iterable[Mapping[str, Any]], *, title: str = DEFAULT_TITLE) -> str:
    """The whole page for ``events`` (RunEvents as JSON objects), as one string."""
    document = graph_document(build_lineage_graph(events), title=title)
    style = _asset(STYLE)
    scripts = [_inline_script(name) for name in SCRIPTS]
    # Nothing may be fetched: only this page's own style and scripts run, and no request leaves it.
    script_hashes = " ".join(f"'{_sha256(script)}'" for script in scripts)
    policy = (
        f"default-src 'none'; style-src '{_sha256(style)}'; script-src {script_hashes}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    slots = {
        "policy": html.escape(policy, quote=False),
        "title": html.escape(title),
        "style": style,
        "data": script_safe_json(document),
        "scripts": "\n".join(f"<script>{script}</script>" for script in scripts),
    }
    # One pass: a slot's text is never read again, so '{{...}}' inside the data or a script stays as it is.
    return _SLOT.sub(lambda match: slots[match.group(1)], _asset(TEMPLATE))


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
