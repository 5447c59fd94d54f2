"""OpenLineage RunEvents (START, COMPLETE) per analysed Glue job, with openlineage-python's classes.

Datasets are named as the rest of Lakeline names them (``lineage.openlineage.naming``), so the events join the
pipeline's own in the lineage store: catalog tables are ``AwsDataCatalog.database.table`` in Athena's
namespace, with a ``symlinks`` facet to the Glue table when the Glue catalog is known; S3 locations,
JDBC tables, DynamoDB tables and streams follow the OpenLineage naming spec (``datasets``). Each job gets
a START and a COMPLETE event, as a run of it would. Each output carries ``schema`` and ``columnLineage`` (per-field
DIRECT/INDIRECT inputs, and the dataset-wide INDIRECT ones). The job carries ``jobType``, the script
(``sourceCode``) and where it lives (``sourceCodeLocation``); the run carries ``processing_engine`` and,
when parts of the script could not be resolved, ``extractionError`` listing each with its line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    extraction_error_run,
    job_type_job,
    parent_run,
    processing_engine_run,
    schema_dataset,
    source_code_job,
    source_code_location_job,
)

from lakeline.engines.base import TableSchema
from lakeline.glue_scanner.catalog import GlueCatalog
from lakeline.glue_scanner.column_exprs import Problem
from lakeline.glue_scanner.datasets import is_catalog_table
from lakeline.glue_scanner.script_analysis import ScriptAnalysis
from lakeline.lineage.openlineage.config import OpenLineageSettings
from lakeline.lineage.openlineage.events import column_lineage_facet
from lakeline.lineage.openlineage.naming import DatasetNaming
from lakeline.lineage.openlineage.producer import LAKELINE_VERSION, PRODUCER, glue_spark_version, owned

GLUE_INTEGRATION = "GLUE"


@dataclass(frozen=True)
class JobRun:
    """What the event of one analysed job says."""

    job_name: str
    run_id: str
    analysis: ScriptAnalysis
    unresolved: tuple[Problem, ...]
    script: str
    script_location: str | None = None
    glue_version: str | None = None


def _schema(schema: TableSchema) -> schema_dataset.SchemaDatasetFacet:
    return schema_dataset.SchemaDatasetFacet(
        fields=[
            schema_dataset.SchemaDatasetFacetFields(name=column.name, type=column.type)
            for column in (*schema.columns, *schema.partition_columns)
        ]
    )


def _catalog_schema(dataset: str, catalog: GlueCatalog, known: Mapping[str, TableSchema]) -> TableSchema | None:
    if dataset in known:
        return known[dataset]  # a JDBC or DynamoDB table that a catalog table describes
    if not is_catalog_table(dataset) or "." not in dataset:
        return None
    database, table = dataset.split(".", 1)
    return catalog.schema_or_none(database, table)


def _extraction_errors(run: JobRun) -> extraction_error_run.ExtractionErrorRunFacet:
    # Tasks: each sink, plus the script as a whole; a task fails if something in it is unresolved.
    writes = run.analysis.writes
    failed = sum(1 for write in writes if write.problems) + (1 if run.analysis.problems or not writes else 0)
    return extraction_error_run.ExtractionErrorRunFacet(
        totalTasks=len(writes) + 1,
        failedTasks=failed,
        errors=[
            extraction_error_run.Error(
                errorMessage=problem.message,
                task=f"{problem.file or 'script'} line {problem.line}" if problem.line else problem.file or "script",
                taskNumber=problem.line or None,
            )
            for problem in run.unresolved
        ],
    )


def job_event(
    run: JobRun,
    *,
    catalog: GlueCatalog,
    naming: DatasetNaming,
    settings: OpenLineageSettings,
    at: datetime,
    state: RunState = RunState.COMPLETE,
) -> RunEvent:
    """One event (START or COMPLETE) of one job's analysed script."""
    if at.tzinfo is None:
        raise ValueError("event time must be timezone-aware")
    analysis = run.analysis
    read = set(analysis.reads)
    for write in analysis.writes:
        read.update(write.inputs)
    inputs = []
    for dataset in sorted(read):
        namespace, name = naming.of(dataset)
        schema = _catalog_schema(dataset, catalog, analysis.schemas)
        facets: dict[str, Any] = {"schema": _schema(schema)} if schema else {}
        facets.update(naming.facets(dataset))
        inputs.append(InputDataset(namespace=namespace, name=name, facets=facets))
    outputs = []
    targets = sorted({write.target for write in analysis.writes if write.target})
    for target in targets:
        writes = [write for write in analysis.writes if write.target == target]
        namespace, name = naming.of(target)
        out_facets: dict[str, Any] = {"columnLineage": column_lineage_facet(writes, naming), **naming.facets(target)}
        schema = _catalog_schema(target, catalog, analysis.schemas)
        if schema is not None:
            out_facets["schema"] = _schema(schema)
        else:
            names = list(dict.fromkeys(column.name for write in writes for column in write.columns))
            if names:
                out_facets["schema"] = schema_dataset.SchemaDatasetFacet(
                    fields=[schema_dataset.SchemaDatasetFacetFields(name=n) for n in names]
                )
        outputs.append(OutputDataset(namespace=namespace, name=name, facets=out_facets))
    # A Glue for Spark job runs the Spark of its Glue version (what OpenLineage's Spark integration reports
    # on Glue); a Glue version Lakeline does not know stays named as Glue's.
    spark = glue_spark_version(run.glue_version)
    run_facets: dict[str, Any] = {
        "processing_engine": processing_engine_run.ProcessingEngineRunFacet(
            version=spark or run.glue_version or "unknown",
            name="spark" if spark else "glue",
            openlineageAdapterVersion=LAKELINE_VERSION,
        )
    }
    if settings.parent is not None:
        root = settings.root
        run_facets["parent"] = parent_run.ParentRunFacet(
            run=parent_run.Run(runId=settings.parent.run_id),
            job=parent_run.Job(namespace=settings.parent.namespace, name=settings.parent.name),
            root=parent_run.Root(
                run=parent_run.RootRun(runId=root.run_id),
                job=parent_run.RootJob(namespace=root.namespace, name=root.name),
            )
            if root
            else None,
        )
    if run.unresolved:
        run_facets["extractionError"] = _extraction_errors(run)
    job_facets: dict[str, Any] = {
        "jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration=GLUE_INTEGRATION, jobType="JOB"),
        "sourceCode": source_code_job.SourceCodeJobFacet(language="python", sourceCode=run.script),
    }
    if run.script_location:
        job_facets["sourceCodeLocation"] = source_code_location_job.SourceCodeLocationJobFacet(
            type="s3", url=run.script_location
        )
    return owned(
        RunEvent(
            eventType=state,
            eventTime=at.astimezone(UTC).isoformat(),
            run=Run(runId=run.run_id, facets=run_facets),
            job=Job(namespace=settings.namespace, name=run.job_name, facets=job_facets),
            producer=PRODUCER,
            inputs=inputs,
            outputs=outputs,
        )
    )
