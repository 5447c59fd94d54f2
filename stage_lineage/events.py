"""The OpenLineage runs of stage A and stage B, the same locally and in the cloud.

Each statement set a stage runs is one OpenLineage run of a job:

    stage A    job ``stage_a.<database>.<table>``          (one per arrival)
    stage B    job ``stage_b.<database>.<table>.step<N>``  (one per step of the run)
    checks     job ``stage_a.<database>.<table>.quality`` or ``stage_b.<database>.<table>.quality`` (#41)

The checks' run is there when the run's table has quality checks: it reads the new version (the checked dataset,
with its ``version`` facet), and its end event carries the results on it (``lakeline.lineage.openlineage.quality``):
``dataQualityAssertions`` is an *input* dataset facet in the spec, so the results go on an input of a run of its
own, the checks, rather than on the output of the step that wrote the version; the ``dataQualityMetrics`` the
checks measured go with them, on the dataset they measured. It COMPLETEs for a published version and FAILs for a
blocked one.

Its ``parent`` facet names the pipeline execution that ran it (job ``stage_a`` or ``stage_b.<database>.<table>``:
the Step Functions execution in the cloud, the local flow's execution otherwise), and its ``root`` the arrival the
whole chain started from (job ``pipeline``, whose run id is the arrival's lineage root id, so archived lineage
records and OpenLineage events meet on one id). A parent configured the standard way (``OPENLINEAGE_PARENT_ID``,
``OPENLINEAGE_ROOT_PARENT_ID``: an orchestrator that started the pipeline) becomes the root instead.

Run ids are derived from the plan (its run token carries the time it was planned), so the router, the
post-update function and the failure function of one execution all name the same run, and a retried
invocation re-emits the same events instead of inventing new runs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from lakeline.commits.versions import version_number
from lakeline.engines.base import TableSchema
from lakeline.errors import LakelineError
from lakeline.lineage.columns.sql import SqlColumnLineage, TableDescriber
from lakeline.lineage.openlineage.config import OpenLineageSettings, RunReference
from lakeline.lineage.openlineage.events import StepRun, sql_step_run, stable_run_id
from lakeline.lineage.openlineage.quality import quality_facets
from lakeline.lineage.openlineage.run_lifecycle import ExecutionLifecycle
from lakeline.names import dml_name
from lakeline.partitions import partition_filter
from lakeline.quality.evaluate import QualityReport
from lakeline.quality.gate import QualityGate
from stage_a.plan import StageAPlan
from stage_b.messages import StageBMessage
from stage_b.plan import StageBPlan
from stage_lineage.records import run_version, stage_a_root_id, stage_b_lineage_ids, taken_messages

logger = logging.getLogger(__name__)

PIPELINE_JOB = "pipeline"
STAGE_A_JOB = "stage_a"
STAGE_B_JOB = "stage_b"


def run_started_at(run_token: str) -> datetime:
    """When the run was planned: the time its token (``20220120t101500123456_...``) starts with."""
    try:
        return datetime.strptime(run_token.split("_", 1)[0], "%Y%m%dt%H%M%S%f").replace(tzinfo=UTC)
    except ValueError:
        raise LakelineError(f"run token {run_token!r} does not start with its planning time") from None


@dataclass(frozen=True)
class PipelineRun:
    """The runs one execution's steps belong to: their parent (the execution) and root (the arrival)."""

    execution: RunReference
    root: RunReference
    started_at: datetime

    def step_run_id(self, key: str) -> str:
        return stable_run_id(self.started_at, f"{self.execution.run_id}/{key}")


def _root(settings: OpenLineageSettings, lineage_root_id: str) -> RunReference:
    configured = settings.root or settings.parent
    return configured or RunReference(settings.namespace, PIPELINE_JOB, lineage_root_id)


def stage_a_run(plan: StageAPlan, settings: OpenLineageSettings) -> PipelineRun:
    started = run_started_at(plan.run_token)
    execution_id = stable_run_id(started, f"{STAGE_A_JOB}:{plan.raw_key}@{plan.run_token}")
    return PipelineRun(
        execution=RunReference(settings.namespace, STAGE_A_JOB, execution_id),
        root=_root(settings, stage_a_root_id(plan)),
        started_at=started,
    )


def stage_b_run(plan: StageBPlan, message: StageBMessage, settings: OpenLineageSettings) -> PipelineRun:
    started = run_started_at(plan.run_token)
    execution_id = stable_run_id(started, f"{STAGE_B_JOB}:{message.deduplication_id()}@{plan.run_token}")
    root_id, _ = stage_b_lineage_ids(message)
    return PipelineRun(
        execution=RunReference(settings.namespace, f"{STAGE_B_JOB}.{plan.dataset}", execution_id),
        root=_root(settings, root_id),
        started_at=started,
    )


def stage_a_lineage_sql(plan: StageAPlan, catalog: TableDescriber) -> str:
    """The insert stage A simulates, for lineage: the raw partition's rows into the stage table."""
    raw = catalog.describe_table(plan.source_database, plan.table)
    columns = ", ".join(dml_name(name) for name in raw.column_names + raw.partition_names)
    partition = [(column, plan.partition[column.name]) for column in raw.partition_columns]
    where = partition_filter(partition)
    return (
        f"INSERT INTO {dml_name(plan.target_database, plan.table)} SELECT {columns} "
        f"FROM {dml_name(plan.source_database, plan.table)}" + (f" WHERE {where}" if where else "")
    )


@dataclass(frozen=True)
class StepContext:
    """What every step of one execution shares: its runs, the catalog, the settings, the engine."""

    pipeline: PipelineRun
    catalog: TableDescriber
    settings: OpenLineageSettings
    engine: str
    engine_version: str | None = None
    """The engine's version where it is not this process's own (a deployed function: the Glue job's Spark)."""
    created: dict[tuple[str, str], TableSchema] = field(default_factory=dict)
    """Tables the execution's steps create, as each step's SQL is read: later steps resolve against them."""

    def bare(self, job_name: str, **facts: Any) -> StepRun:
        """The step's run without column lineage (``facts``: its SQL, or its datasets by name)."""
        return StepRun(
            job_name=job_name,
            run_id=self.pipeline.step_run_id(job_name),
            job_namespace=self.settings.namespace,
            dataset_namespace=self.settings.dataset_namespace,
            glue_catalog=self.settings.glue_catalog,
            parent=self.pipeline.execution,
            root=self.pipeline.root,
            engine=self.engine,
            engine_version=self.engine_version,
            **facts,
        )

    def from_sql(self, job_name: str, sql: str, default_database: str | None = None) -> StepRun:
        """The step's run, with column lineage when its SQL resolves against the catalog.

        Column lineage is a facet: a step whose SQL does not resolve (a column that is not in the
        catalog, SQL the analyser cannot read) still gets its events with the SQL and the tables it reads
        and writes, without the facet; the engine decides whether the SQL itself is good. Only SQL that
        cannot be parsed at all gives a run without datasets.
        """
        scoped = replace(self.settings, parent=self.pipeline.execution, root=self.pipeline.root)
        try:
            return sql_step_run(
                sql,
                catalog=self.catalog,
                job_name=job_name,
                run_id=self.pipeline.step_run_id(job_name),
                settings=scoped,
                engine=self.engine,
                engine_version=self.engine_version,
                default_database=default_database,
                created=self.created,
            )
        except Exception as error:  # lineage is a facet: it never fails the step it describes
            logger.warning("%s: no column lineage (%s: %s)", job_name, type(error).__name__, error)
        analyser = SqlColumnLineage(self.catalog, default_database=default_database, created=self.created)
        try:
            tables = analyser.tables(sql)
        except Exception as error:  # as above
            logger.warning("%s: no lineage at all (%s: %s)", job_name, type(error).__name__, error)
            return self.bare(job_name, sql=sql, dialect="athena")
        return self.bare(
            job_name,
            sql=sql,
            dialect="athena",
            extra_inputs=tables.inputs,
            extra_outputs=tables.outputs,
            schemas=self._known_schemas([*tables.inputs, *tables.outputs]),
        )

    def _known_schemas(self, names: list[str]) -> dict[str, TableSchema]:
        """Schemas of the catalog's tables and of created ones whose columns are known, for the schema facets."""
        schemas = {}
        for name in names:
            database, table = name.split(".", 1)
            schema = self.created.get((database, table))
            if schema is None:
                try:
                    schema = self.catalog.describe_table(database, table)
                except LakelineError:  # not in the catalog (any more): no schema facet
                    continue
            if schema.columns or schema.partition_columns:
                schemas[name] = schema
        return schemas


def stage_a_steps(
    plan: StageAPlan,
    *,
    catalog: TableDescriber,
    settings: OpenLineageSettings,
    engine: str,
    engine_version: str | None = None,
) -> list[StepRun]:
    """Stage A's one step: the raw partition into the stage table."""
    return _stage_a_steps(plan, StepContext(stage_a_run(plan, settings), catalog, settings, engine, engine_version))


def _with_versions(steps: list[StepRun], versions: dict[str, str | None]) -> list[StepRun]:
    """``steps`` with the partition versions they read and write (``lakeline.commits.versions``), where known."""
    known = {name: version for name, version in versions.items() if version is not None}
    return [replace(step, versions=known) for step in steps] if known else steps


def _stage_a_steps(plan: StageAPlan, context: StepContext) -> list[StepRun]:
    # The raw partition has no versions (its files are the lineage records' roots); the output has the run's.
    target = f"{plan.target_database}.{plan.table}"
    return _with_versions(_stage_a_step(plan, context), {target: run_version(plan)})


def _stage_a_step(plan: StageAPlan, context: StepContext) -> list[StepRun]:
    catalog = context.catalog
    job_name = f"{STAGE_A_JOB}.{plan.target_database}.{plan.table}"
    try:
        sql = stage_a_lineage_sql(plan, catalog)
    except Exception as error:  # as in StepContext.from_sql
        # The raw table is not in the catalog (any more): the run still gets events, naming its datasets.
        logger.warning("%s: raw table not readable for lineage (%s: %s)", job_name, type(error).__name__, error)
        source, target = f"{plan.source_database}.{plan.table}", f"{plan.target_database}.{plan.table}"
        return [context.bare(job_name, extra_inputs=(source,), extra_outputs=(target,))]
    return [context.from_sql(job_name, sql)]


def stage_b_steps(
    plan: StageBPlan,
    message: StageBMessage,
    *,
    catalog: TableDescriber,
    settings: OpenLineageSettings,
    engine: str,
    engine_version: str | None = None,
) -> list[StepRun]:
    """One run per step of the stage B run, from the step's SQL as the user wrote it (tokens resolved)."""
    context = StepContext(stage_b_run(plan, message, settings), catalog, settings, engine, engine_version)
    return _stage_b_steps(plan, message, context)


def _trigger_versions(plan: StageBPlan, message: StageBMessage) -> dict[str, str | None]:
    """The versions of the sources whose arrivals the run took (each message's ``trigger``) and, for a
    triggerMode all target, of every other source it was built from (each message's ``also_lineage``: that
    source's latest recorded arrival). Where a source's version is known more than once (a run under a lease
    takes every message waiting), the newest wins. The step reads what the catalog points at when it runs, so
    this is the version it read: the one that triggered it, or the latest of each other source (a newer one
    published meanwhile triggers a run of its own)."""
    newest: dict[str, tuple[int, str]] = {}
    for taken in taken_messages(plan, message):
        known: list[tuple[str | None, str | None]] = [(taken.trigger.table, taken.trigger.version)]
        known += [(source.table, source.version) for source in taken.also_lineage]
        for table, token in known:
            if table is not None and token is not None:
                key = (version_number(token), token)
                newest[table] = max(newest.get(table, key), key)
    return {table: token for table, (_, token) in newest.items()}


def _stage_b_steps(plan: StageBPlan, message: StageBMessage, context: StepContext) -> list[StepRun]:
    steps = [
        # Unqualified tables resolve against the step's database, as the engine runs it.
        context.from_sql(f"{STAGE_B_JOB}.{plan.dataset}.step{index}", sql, plan.steps[index].db)
        for index, sql in enumerate(plan.resolved_sql)
    ]
    return _with_versions(steps, {**_trigger_versions(plan, message), plan.dataset: run_version(plan)})


CHECKS_JOB = "quality"
"""The last part of the checks' job name: ``<the stage's job of the table>.quality``."""


def _checks(
    context: StepContext, job: str, dataset: str, version: str | None, gate: QualityGate | None
) -> StepRun | None:
    """The checks' run of an execution writing ``dataset`` (version ``version``); ``None`` without checks."""
    if gate is None:
        return None
    return context.bare(
        f"{job}.{CHECKS_JOB}", extra_inputs=(dataset,), versions={dataset: version} if version is not None else {}
    )


def with_results(checks: StepRun, report: QualityReport) -> StepRun:
    """The checks' run with what ``report`` found on the dataset it checked."""
    (dataset,) = checks.extra_inputs
    return replace(checks, results={dataset: quality_facets(report)})


def _owns_root(settings: OpenLineageSettings, opens_tree: bool) -> bool:
    """Whether an execution reports the root run's own events: it opened the tree, no orchestrator did."""
    return opens_tree and settings.root is None and settings.parent is None


def stage_a_lifecycle(
    plan: StageAPlan,
    *,
    catalog: TableDescriber,
    settings: OpenLineageSettings,
    engine: str,
    engine_version: str | None = None,
    report: QualityReport | None = None,
) -> ExecutionLifecycle:
    """The runs of one stage A execution: the arrival's root (stage A opens every tree), the execution, its step,
    its checks (with ``report``'s results, when known)."""
    context = StepContext(stage_a_run(plan, settings), catalog, settings, engine, engine_version)
    target = f"{plan.target_database}.{plan.table}"
    checks = _checks(context, f"{STAGE_A_JOB}.{target}", target, run_version(plan), plan.quality)
    return _lifecycle(context, _stage_a_steps(plan, context), opens_tree=True, checks=checks, report=report)


def stage_b_lifecycle(
    plan: StageBPlan,
    message: StageBMessage,
    *,
    catalog: TableDescriber,
    settings: OpenLineageSettings,
    engine: str,
    engine_version: str | None = None,
    report: QualityReport | None = None,
) -> ExecutionLifecycle:
    """The runs of one stage B execution; it owns the root only when nothing upstream triggered it."""
    context = StepContext(stage_b_run(plan, message, settings), catalog, settings, engine, engine_version)
    checks = _checks(context, f"{STAGE_B_JOB}.{plan.dataset}", plan.dataset, run_version(plan), plan.quality)
    steps = _stage_b_steps(plan, message, context)
    opens_tree = message.lineage.root_id is None
    return _lifecycle(context, steps, opens_tree=opens_tree, checks=checks, report=report)


def _lifecycle(
    context: StepContext,
    steps: list[StepRun],
    *,
    opens_tree: bool,
    checks: StepRun | None,
    report: QualityReport | None,
) -> ExecutionLifecycle:
    pipeline, settings = context.pipeline, context.settings
    return ExecutionLifecycle(
        steps,
        pipeline.execution,
        pipeline.root,
        _owns_root(settings, opens_tree),
        settings.dataset_namespace,
        context.engine,
        context.engine_version,
        checks=with_results(checks, report) if checks is not None and report is not None else checks,
    )
