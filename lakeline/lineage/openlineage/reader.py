"""Reading stored OpenLineage RunEvents (JSON objects): the one reader of what an event says.

``lineage.viewer.html`` (the page) reads events through ``read_run_event``: the job, the run, its state
and time, the input and output datasets with their schema fields, a COMPLETE event's output
``columnLineage``, the SQL facet and the error message of a failed run. ``lineage.viewer.column_graph``
(following a column back) reads only what it needs, through ``read_written_lineage``: the outputs'
``columnLineage``, with the same facet reader. What is read and has the wrong shape is refused with an
``InvalidInputError`` naming the place in the event; what is not read is not checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lakeline.errors import InvalidInputError
from lakeline.lineage.columns.model import Subtype, Transformation, TransformationType

FAILED_STATES = frozenset({"FAIL", "ABORT"})


@dataclass(frozen=True)
class EventJob:
    namespace: str
    name: str

    @property
    def key(self) -> str:
        """``namespace/name``, as a column tree names the job that made a link."""
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class InputField:
    """One input of a column (or of a whole dataset): ``namespace``/``name``.``field``, and how it feeds."""

    namespace: str
    name: str
    field: str
    transformations: tuple[Transformation, ...]


@dataclass(frozen=True)
class ColumnLineage:
    """A ``columnLineage`` facet: the inputs of each output field, and those of the whole dataset."""

    fields: tuple[tuple[str, tuple[InputField, ...]], ...]
    dataset: tuple[InputField, ...]


@dataclass(frozen=True)
class SchemaField:
    name: str
    type: str | None


@dataclass(frozen=True)
class EventDataset:
    namespace: str
    name: str
    schema: tuple[SchemaField, ...]
    column_lineage: ColumnLineage | None


@dataclass(frozen=True)
class RunEventView:
    """What one RunEvent says, read and checked."""

    data: Mapping[str, Any]
    where: str
    """How messages name the event: ``event 3``."""
    job: EventJob
    state: str
    """``eventType`` in upper case; ``OTHER`` when the event has none."""
    time: datetime | None
    """``eventTime`` with a time zone (UTC when it has none); None when the event has none."""
    run_id: str
    inputs: tuple[EventDataset, ...]
    outputs: tuple[EventDataset, ...]
    sql: str | None
    dialect: str | None
    error: str | None

    @property
    def failed(self) -> bool:
        return self.state in FAILED_STATES


def text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInputError(f"{where} must be a non-empty string, not {value!r}")
    return value


def mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{where} must be a JSON object, not {type(value).__name__}")
    return value


def array(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInputError(f"{where} must be a JSON array, not {type(value).__name__}")
    return value


def event_time(value: Any, where: str) -> datetime:
    moment_text = text(value, f"{where} eventTime")
    try:
        moment = datetime.fromisoformat(moment_text)
    except ValueError:
        raise InvalidInputError(f"{where} eventTime {moment_text!r} is not an ISO 8601 time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def transformations(raw: Mapping[str, Any], where: str) -> tuple[Transformation, ...]:
    """The ``transformations`` of one input field; none (a facet older than spec 1-1): DIRECT."""
    items = array(raw.get("transformations"), f"{where} transformations")
    if not items:
        # Facets older than spec 1-1 carry no transformations: all that is known is that it feeds.
        return (Transformation(TransformationType.DIRECT, Subtype.TRANSFORMATION),)
    result = []
    for item in items:
        try:
            kind = TransformationType(str(item["type"]).upper())
            default = Subtype.TRANSFORMATION if kind is TransformationType.DIRECT else Subtype.FILTER
            subtype = Subtype(str(item.get("subtype") or default).upper())
            result.append(Transformation(kind, subtype, bool(item.get("masking") or False)))
        except (KeyError, ValueError, TypeError, AttributeError) as error:
            raise InvalidInputError(f"{where}: transformation {item!r} is not valid: {error}") from error
    return tuple(result)


def _input_fields(raw: Any, where: str) -> tuple[InputField, ...]:
    found = []
    for item in array(raw, f"{where} inputFields"):
        item = mapping(item, f"{where} input field")
        namespace = text(item.get("namespace"), f"{where} input field namespace")
        name = text(item.get("name"), f"{where} input field name")
        field = text(item.get("field"), f"{where} input field's field")
        found.append(InputField(namespace, name, field, transformations(item, f"{where} input {name}.{field}")))
    return tuple(found)


def _column_lineage(facets: Mapping[str, Any], where: str) -> ColumnLineage | None:
    if not facets.get("columnLineage"):
        return None
    facet = mapping(facets["columnLineage"], f"{where} columnLineage facet")
    fields = []
    for name, column in mapping(facet.get("fields"), f"{where} columnLineage fields").items():
        place = f"{where} columnLineage field {name}"
        fields.append((str(name), _input_fields(mapping(column, place).get("inputFields"), place)))
    return ColumnLineage(tuple(fields), _input_fields(facet.get("dataset"), f"{where} columnLineage dataset"))


def _dataset(raw: Any, place: str, side: str, position: int, *, with_lineage: bool) -> EventDataset:
    where = f"{place} {side}[{position}]"
    data = mapping(raw, where)
    namespace = text(data.get("namespace"), f"{where} namespace")
    name = text(data.get("name"), f"{where} name")
    facets = mapping(data.get("facets"), f"{where} facets")
    schema = mapping(facets.get("schema"), f"{where} schema facet")
    columns = []
    for column in array(schema.get("fields"), f"{where} schema fields"):
        column = mapping(column, f"{where} schema field")
        kind = column.get("type")
        columns.append(SchemaField(text(column.get("name"), f"{where} schema field name"), str(kind) if kind else None))
    # Messages about the facet name the dataset: "event of ns/job, output db.table columnLineage ...".
    lineage = _column_lineage(facets, f"{place} {side.removesuffix('s')} {name}") if with_lineage else None
    return EventDataset(namespace, name, tuple(columns), lineage)


@dataclass(frozen=True)
class WrittenLineage:
    """What a COMPLETE event says its job wrote, column by column: all that following a column back needs."""

    job: EventJob
    outputs: tuple[tuple[str, str, ColumnLineage], ...]
    """(namespace, name, its ``columnLineage``) of each output that carries one."""


def read_written_lineage(data: Any, where: str) -> WrittenLineage:
    """The outputs' ``columnLineage`` of one COMPLETE event, and its job's name if it has one.

    Only that is read, so an event from another producer whose other parts Lakeline does not use (an
    ``eventTime`` as a number, inputs without schema names, no job) still gives its column lineage.
    """
    data = mapping(data, where)
    job_data = data.get("job") if isinstance(data.get("job"), Mapping) else {}
    job = EventJob(str(job_data.get("namespace") or ""), str(job_data.get("name") or ""))
    outputs = []
    for position, raw in enumerate(array(data.get("outputs"), f"{where} outputs")):
        output = mapping(raw, f"{where} outputs[{position}]")
        name = text(output.get("name"), f"{where} outputs[{position}] name")
        facets = mapping(output.get("facets"), f"{where} outputs[{position}] facets")
        lineage = _column_lineage(facets, f"{where} of {job.key}, output {name}")
        if lineage is not None:
            outputs.append((text(output.get("namespace"), f"{where} outputs[{position}] namespace"), name, lineage))
    return WrittenLineage(job, tuple(outputs))


def read_run_event(data: Any, where: str) -> RunEventView:
    """Read one RunEvent; ``where`` names it in messages (``event 3``)."""
    if not isinstance(data, Mapping):
        raise InvalidInputError(f"{where} must be a JSON object, not {type(data).__name__}")
    job_data = mapping(data.get("job"), f"{where} job")
    job = EventJob(
        text(job_data.get("namespace"), f"{where} job.namespace"), text(job_data.get("name"), f"{where} job.name")
    )
    run = mapping(data.get("run"), f"{where} run")
    moment = None if data.get("eventTime") is None else event_time(data.get("eventTime"), where)
    place = f"{where} of {job.key},"
    state = str(data.get("eventType") or "OTHER").upper()
    # Only a COMPLETE event's outputs say what was written; other column lineage is not read (nor refused).
    datasets = {
        side: tuple(
            _dataset(raw, place, side, position, with_lineage=side == "outputs" and state == "COMPLETE")
            for position, raw in enumerate(array(data.get(side), f"{place} {side}"))
        )
        for side in ("inputs", "outputs")
    }
    sql = mapping(mapping(job_data.get("facets"), f"{where} job facets").get("sql"), f"{where} sql facet")
    run_facets = mapping(run.get("facets"), f"{where} run facets")
    message = mapping(run_facets.get("errorMessage"), f"{where} errorMessage facet").get("message")
    return RunEventView(
        data=data,
        where=where,
        job=job,
        state=state,
        time=moment,
        run_id=str(run.get("runId") or ""),
        inputs=datasets["inputs"],
        outputs=datasets["outputs"],
        sql=str(sql["query"]) if sql.get("query") else None,
        dialect=(str(sql.get("dialect") or "") or None) if sql.get("query") else None,
        error=str(message) if message else None,
    )


def with_parts(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The events, each COMPLETE one with the column lineage of its run's RUNNING events merged in.

    OpenLineage consumers merge the facets of one run's events; an event too large to send whole reaches
    the readers as its parts (``lineage.openlineage.bound``: RUNNING events of the same run before the
    COMPLETE), and what a run wrote is read from its COMPLETE event. Events that are not JSON objects, and
    runs without a COMPLETE event, pass unchanged (the readers refuse or skip them as before).
    """
    events = list(events)
    running: dict[str, list[Mapping[str, Any]]] = {}
    for event in events:
        if isinstance(event, Mapping) and str(event.get("eventType", "")).upper() == "RUNNING":
            running.setdefault(_run_id(event), []).append(event)
    if not running:
        return events
    return [_merged(event, running.get(_run_id(event), [])) for event in events]


def _run_id(event: Mapping[str, Any]) -> str:
    run = event.get("run")
    return str(run.get("runId") or "") if isinstance(run, Mapping) else ""


def _merged(event: Mapping[str, Any], parts: list[Mapping[str, Any]]) -> Mapping[str, Any]:
    if not parts or not isinstance(event, Mapping) or str(event.get("eventType", "")).upper() != "COMPLETE":
        return event
    outputs = [dict(output) if isinstance(output, Mapping) else output for output in event.get("outputs") or []]
    by_name = {(o.get("namespace"), o.get("name")): o for o in outputs if isinstance(o, dict)}
    for part in parts:
        for extra in part.get("outputs") or []:
            lineage = (extra.get("facets") or {}).get("columnLineage") if isinstance(extra, Mapping) else None
            if not isinstance(lineage, Mapping):
                continue
            output = by_name.get((extra.get("namespace"), extra.get("name")))
            if output is None:
                output = by_name[(extra.get("namespace"), extra.get("name"))] = {**extra, "facets": {}}
                outputs.append(output)
            facets = output["facets"] = dict(output.get("facets") or {})
            have = dict(facets.get("columnLineage") or {"_producer": lineage.get("_producer"), "fields": {}})
            have["fields"] = {**(have.get("fields") or {}), **(lineage.get("fields") or {})}
            if lineage.get("dataset"):
                known = list(have.get("dataset") or [])  # the START's parts bring the same again
                have["dataset"] = known + [field for field in lineage["dataset"] if field not in known]
            have.setdefault("_schemaURL", lineage.get("_schemaURL"))
            facets["columnLineage"] = have
    return {**event, "outputs": outputs}
