"""OpenLineage RunEvents for pipeline steps, built with openlineage-python's own classes.

One step (a stage A statement set, a stage B step, an analysed Glue job) is one OpenLineage run of a job:
START when it begins, COMPLETE or FAIL when it ends. Each event carries:

- run facets: ``parent`` (the pipeline execution, with its ``root`` when known), ``processing_engine``,
  and ``errorMessage`` on FAIL;
- job facets: ``sql`` (query and dialect) and ``jobType`` (BATCH, integration LAKELINE, QUERY);
- datasets: inputs with their ``schema``; outputs with ``schema`` and ``columnLineage`` (per-field
  DIRECT/INDIRECT input fields, and the dataset-wide INDIRECT ones in ``dataset``); each with its ``version``
  where the step knows which partition version it reads or writes (``lakeline.commits.versions``).

Datasets are ``database.table`` inside Lakeline and are named per the OpenLineage naming conventions in
the events (``lineage.openlineage.naming``: ``AwsDataCatalog.database.table`` in Athena's namespace on AWS, with a
``symlinks`` facet to the Glue table when the Glue catalog is configured).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    dataset_version_dataset,
    error_message_run,
    job_type_job,
    parent_run,
    processing_engine_run,
    schema_dataset,
    sql_job,
)
from openlineage.client.serde import Serde
from openlineage.client.uuid import generate_new_uuid, generate_static_uuid

from lakeline.engines.base import TableNotFound, TableSchema
from lakeline.lineage.columns.model import Dependencies, OutputColumn, StatementLineage, group_by_source, union
from lakeline.lineage.columns.sql import SqlColumnLineage, TableDescriber
from lakeline.lineage.openlineage.config import OpenLineageSettings, RunReference
from lakeline.lineage.openlineage.naming import DatasetNaming
from lakeline.lineage.openlineage.producer import LAKELINE_VERSION, PRODUCER, engine_version, owned

__all__ = ["PRODUCER"]  # re-exported: callers have always found it here

INTEGRATION = "LAKELINE"


def new_run_id(at: datetime | None = None) -> str:
    """A fresh run id (a time-ordered UUIDv7, as openlineage-python makes them)."""
    return str(generate_new_uuid(at))


def stable_run_id(started_at: datetime, key: str) -> str:
    """The same run id for the same step of the same execution, so a redelivered step is one run."""
    return str(generate_static_uuid(started_at, key.encode("utf-8")))


@dataclass(frozen=True)
class StepRun:
    """Everything an event of one step says, whatever its state."""

    job_name: str
    run_id: str
    job_namespace: str
    dataset_namespace: str
    glue_catalog: str | None = None
    parent: RunReference | None = None
    root: RunReference | None = None
    sql: str | None = None
    dialect: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    statements: tuple[StatementLineage, ...] = ()
    schemas: Mapping[str, TableSchema] = field(default_factory=dict)
    """Schemas of the datasets read or written, by ``database.table``, for the schema facets."""
    extra_inputs: tuple[str, ...] = ()
    extra_outputs: tuple[str, ...] = ()
    """Datasets known only at table level (a Glue job whose columns were not analysed)."""
    versions: Mapping[str, str] = field(default_factory=dict)
    """The partition version read or written, by ``database.table``, where the step knows it."""
    results: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any]]] = field(default_factory=dict)
    """What the run found of an input, by ``database.table``: its dataset facets and input facets (a quality run's
    ``dataQualityMetrics`` and ``dataQualityAssertions``), carried by the run's end event (COMPLETE or FAIL) only."""

    def __post_init__(self) -> None:
        try:
            uuid.UUID(self.run_id)
        except ValueError:
            raise ValueError(f"run id {self.run_id!r} of {self.job_name} is not a UUID") from None

    @property
    def naming(self) -> DatasetNaming:
        return DatasetNaming(self.dataset_namespace, self.glue_catalog)

    @property
    def input_names(self) -> list[str]:
        outputs = set(self.output_names)
        names: dict[str, None] = {}
        for statement in self.statements:
            for dataset in statement.inputs:
                names.setdefault(dataset)
        for dataset in self.extra_inputs:
            names.setdefault(dataset)
        # A table this step writes before reading it back (a temp table) is not one of its inputs.
        return [name for name in names if name not in outputs or self._read_before_written(name)]

    @property
    def output_names(self) -> list[str]:
        names: dict[str, None] = {}
        for statement in self.statements:
            if statement.target:
                names.setdefault(statement.target)
        for dataset in self.extra_outputs:
            names.setdefault(dataset)
        return list(names)

    def _read_before_written(self, dataset: str) -> bool:
        for statement in self.statements:
            if dataset in statement.inputs:
                return True
            if statement.target == dataset:
                return False
        return True


def _schema_facet(fields: Sequence[tuple[str, str | None]]) -> schema_dataset.SchemaDatasetFacet:
    return schema_dataset.SchemaDatasetFacet(
        fields=[schema_dataset.SchemaDatasetFacetFields(name=name, type=kind) for name, kind in fields]
    )


def _input_fields(dependencies: Dependencies, naming: DatasetNaming) -> list[column_lineage_dataset.InputField]:
    fields = []
    for source, transformations in group_by_source(dependencies).items():
        namespace, name = naming.of(source.dataset)
        fields.append(
            column_lineage_dataset.InputField(
                namespace=namespace,
                name=name,
                field=source.field,
                transformations=[
                    column_lineage_dataset.Transformation(
                        type=t.type.value,
                        subtype=t.subtype.value,
                        masking=t.masking,
                    )
                    for t in transformations
                ],
            )
        )
    return fields


class WrittenColumns(Protocol):
    """What one write of an output says of its columns: a SQL statement's lineage, or a Glue script's sink."""

    @property
    def columns(self) -> tuple[OutputColumn, ...]: ...

    @property
    def dataset(self) -> Dependencies: ...


def column_lineage_facet(
    statements: Iterable[WrittenColumns], naming: DatasetNaming
) -> column_lineage_dataset.ColumnLineageDatasetFacet:
    """The ``columnLineage`` facet of one output written by ``statements`` (several when it is appended to)."""
    per_column: dict[str, list[Dependencies]] = {}
    dataset: list[Dependencies] = []
    for statement in statements:
        for column in statement.columns:
            per_column.setdefault(column.name, []).append(column.dependencies)
        dataset.append(statement.dataset)
    fields = {
        name: column_lineage_dataset.Fields(inputFields=_input_fields(union(*parts), naming))
        for name, parts in per_column.items()
        if union(*parts)
    }
    return column_lineage_dataset.ColumnLineageDatasetFacet(
        fields=fields, dataset=_input_fields(union(*dataset), naming)
    )


def _schema_fields(step: StepRun, dataset: str) -> list[tuple[str, str | None]] | None:
    schema = step.schemas.get(dataset)
    if schema is not None:
        # A created table's column whose type is not known ("") has none in the facet, where it is optional.
        return [(c.name, c.type or None) for c in (*schema.columns, *schema.partition_columns)]
    for statement in step.statements:
        if statement.target == dataset:
            return [(column.name, None) for column in statement.columns]
    return None


def _dataset_facets(step: StepRun, dataset: str) -> dict[str, Any]:
    """The facets every dataset of the step carries: its naming (``symlinks``) and its ``version``."""
    facets: dict[str, Any] = dict(step.naming.facets(dataset))
    version = step.versions.get(dataset)
    if version is not None:
        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=version)
    return facets


def _inputs(step: StepRun, ended: bool) -> list[InputDataset]:
    inputs = []
    naming = step.naming
    for dataset in step.input_names:
        fields = _schema_fields(step, dataset)
        facets: dict[str, Any] = {"schema": _schema_facet(fields)} if fields else {}
        facets.update(_dataset_facets(step, dataset))
        found, input_facets = step.results.get(dataset, ({}, {})) if ended else ({}, {})
        facets.update(found)
        namespace, name = naming.of(dataset)
        inputs.append(
            InputDataset(namespace=namespace, name=name, facets=facets, inputFacets=dict(input_facets) or None)
        )
    return inputs


def _outputs(step: StepRun) -> list[OutputDataset]:
    outputs = []
    naming = step.naming
    for dataset in step.output_names:
        facets: dict[str, Any] = {}
        fields = _schema_fields(step, dataset)
        if fields:
            facets["schema"] = _schema_facet(fields)
        facets.update(_dataset_facets(step, dataset))
        writers = [statement for statement in step.statements if statement.target == dataset]
        if writers:
            facets["columnLineage"] = column_lineage_facet(writers, naming)
        namespace, name = naming.of(dataset)
        outputs.append(OutputDataset(namespace=namespace, name=name, facets=facets))
    return outputs


def _parent_facet(parent: RunReference, root: RunReference | None) -> parent_run.ParentRunFacet:
    return parent_run.ParentRunFacet(
        run=parent_run.Run(runId=parent.run_id),
        job=parent_run.Job(namespace=parent.namespace, name=parent.name),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=root.run_id),
            job=parent_run.RootJob(namespace=root.namespace, name=root.name),
        )
        if root
        else None,
    )


def run_event(
    step: StepRun,
    state: RunState,
    *,
    at: datetime,
    error: BaseException | str | None = None,
    stack_trace: str | None = None,
) -> RunEvent:
    """One RunEvent of ``step`` in ``state`` (START, COMPLETE, FAIL, ...), at time ``at``."""
    if at.tzinfo is None:
        raise ValueError("event time must be timezone-aware")
    run_facets: dict[str, Any] = {}
    if step.parent is not None:
        run_facets["parent"] = _parent_facet(step.parent, step.root)
    if step.engine:
        run_facets["processing_engine"] = processing_engine_run.ProcessingEngineRunFacet(
            version=step.engine_version or engine_version(step.engine) or "unknown",
            name=step.engine,
            openlineageAdapterVersion=LAKELINE_VERSION,
        )
    if state is RunState.FAIL:
        message = (f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else error) or "failed"
        run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=message, programmingLanguage="SQL" if step.sql else "PYTHON", stackTrace=stack_trace
        )
    job_facets: dict[str, Any] = {
        "jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration=INTEGRATION, jobType="QUERY")
    }
    if step.sql:
        job_facets["sql"] = sql_job.SQLJobFacet(query=step.sql, dialect=step.dialect)
    event = RunEvent(
        eventType=state,
        eventTime=at.astimezone(UTC).isoformat(),
        run=Run(runId=step.run_id, facets=run_facets),
        job=Job(namespace=step.job_namespace, name=step.job_name, facets=job_facets),
        producer=PRODUCER,
        inputs=_inputs(step, state in (RunState.COMPLETE, RunState.FAIL)),
        outputs=_outputs(step),
    )
    return owned(event)


def event_to_dict(event: RunEvent) -> dict[str, Any]:
    """The event as the JSON object a transport sends (what lineage records keep)."""
    result = Serde.to_dict(event)
    if not isinstance(result, dict):
        raise TypeError("an OpenLineage event serialises to a JSON object")
    return result


def now() -> datetime:
    return datetime.now(UTC)


def sql_step_run(
    sql: str,
    *,
    catalog: TableDescriber,
    job_name: str,
    run_id: str,
    settings: OpenLineageSettings,
    dialect: str = "athena",
    default_database: str | None = None,
    engine: str | None = None,
    engine_version: str | None = None,
    created: dict[tuple[str, str], TableSchema] | None = None,
) -> StepRun:
    """The step that runs ``sql``: its column lineage from the SQL text and its datasets' schemas.

    ``created``: tables earlier steps of the same run made (shared with them; see ``SqlColumnLineage``).
    """
    # Its own when none is shared: the schema facets of the tables this step creates come from it.
    created = created if created is not None else {}
    analyser = SqlColumnLineage(catalog, dialect=dialect, default_database=default_database, created=created)
    statements = tuple(analyser.statements(sql))
    names = {name for statement in statements for name in (*statement.inputs, statement.target) if name}
    schemas = {}
    for name in sorted(names):
        database, table = name.split(".", 1)
        try:
            schemas[name] = catalog.describe_table(database, table)
        except TableNotFound:
            # Made by this step or an earlier one of the run: its columns come from the lineage.
            if (database, table) in created:
                schemas[name] = created[(database, table)]
    return StepRun(
        job_name=job_name,
        run_id=run_id,
        job_namespace=settings.namespace,
        dataset_namespace=settings.dataset_namespace,
        glue_catalog=settings.glue_catalog,
        parent=settings.parent,
        root=settings.root,
        sql=sql,
        dialect=dialect,
        engine=engine,
        engine_version=engine_version,
        statements=statements,
        schemas=schemas,
    )
