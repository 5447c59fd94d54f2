"""The quality step (#41): a run's new version checked between the engine's writes and the commit.

What the commit would publish is read through a temp table over a manifest of its files (``stage_a.manifest``'s
symlink table): the files the run wrote into its prefix and, for an incremental append, the published files the
commit carries into it (less those the run replaces), so a rule judges the version readers would see, not only
the rows the run adds. The table's columns are the checked table's data columns, as the catalog has them.
``evaluate`` runs the checks on the stage's engine; the report goes beside the run (``lakeline.quality.gate``),
where the post-update and the failure function read it for the lineage. A ``block`` rule that failed raises
``QualityBlocked``: the state machine's Catch (or the embedded runtime) sends the run to its failure function,
told the step was ``quality``, which deletes the run's prefix, ends the lease and parks the input with the reason.
Called by the quality function (``lambdas/quality``) and by the embedded runtime, so both run the same code.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from dataclasses import asdict
from typing import Any, Protocol

from lakeline.engines.base import Engine, QueryResult
from lakeline.errors import InvalidInputError, LakelineError
from lakeline.names import ddl_name
from lakeline.partitions import file_name
from lakeline.quality.evaluate import CheckResult, QualityReport, evaluate
from lakeline.quality.gate import QualityGate
from lakeline.quality.sql import TableRef
from lakeline.storage import MANIFEST_OBJECT, ObjectMissing, ObjectStore, manifest_object, manifest_prefix
from stage_a.manifest import symlink_table_ddl

logger = logging.getLogger(__name__)

READ_FORMATS = frozenset({"parquet", "orc", "json"})
"""The stage formats the symlink table reads as written (a TEXTFILE stage table's files have no header, which
the manifest table of raw CSV files skips)."""
SHOWN_VALUE = 60  # characters of one sample value in the reason


class QualityBlocked(LakelineError):
    """A ``block`` rule failed: the version must not be published. The message names every failed rule, its
    metric and up to five of its failing rows."""

    def __init__(self, report: QualityReport) -> None:
        self.report = report
        super().__init__(blocked_reason(report))


def blocked_reason(report: QualityReport) -> str:
    failed = [result for result in report.failed if result.severity == "block"]
    parts = [_described(result) for result in failed]
    return f"quality checks blocked {report.table}: " + "; ".join(parts)


def _described(result: CheckResult) -> str:
    text = f"rule {result.rule!r} failed"
    if result.metric is not None:
        text += f" (metric {result.metric:g})"
    if result.note:
        text += f" ({result.note})"
    if result.sample:
        rows = [{k: _short(v) for k, v in row.items()} for row in result.sample]
        text += f", failing rows: {json.dumps(rows, separators=(',', ':'))}"
    return text


def _short(value: str | None) -> str | None:
    return value if value is None or len(value) <= SHOWN_VALUE else value[: SHOWN_VALUE - 1] + "…"


REPORT_OBJECT = "quality.json"


def report_location(target_location: str) -> str:
    """Where the quality step of the run writing ``target_location`` keeps its report: in the run's manifest
    prefix, which goes with the run (its failure path deletes it after the failure function read it; the sweep
    deletes it with the version), so the post-update and the failure function read it by the plan alone."""
    return manifest_prefix(target_location) + REPORT_OBJECT


def report_to_dict(report: QualityReport) -> dict[str, Any]:
    """The report as ``quality.json`` and a run's ``summary.json`` hold it."""
    return {"table": report.table, "blocked": report.blocked, "results": [asdict(result) for result in report.results]}


def report_to_json(report: QualityReport) -> str:
    return json.dumps(report_to_dict(report), sort_keys=True)


def report_from_json(text: str) -> QualityReport:
    data = json.loads(text)
    results = tuple(
        CheckResult(
            rule=result["rule"],
            severity=result["severity"],
            passed=result["passed"],
            metric=result["metric"],
            sample=tuple(result["sample"]),
            note=result["note"],
        )
        for result in data["results"]
    )
    return QualityReport(data["table"], results)


def failed_run_report(gate: QualityGate | None, store: ObjectStore, target_location: str) -> QualityReport | None:
    """A failed run's report, read by its failure function before the run's prefix goes (the report goes with
    it); ``None`` without checks, when its checks did not report (they never ran, or crashed), or when the report
    cannot be read (a redelivered failure after the prefix went): the failure is ended all the same, its reason
    says why."""
    if gate is None:
        return None
    try:
        return read_report(store, target_location)
    except Exception as error:  # any store's: the run's end must not wait on its report
        logger.warning("quality: the report of %s could not be read: %s", target_location, error)
        return None


def blocked_by_checks(failed_step: str, reason: str, report: QualityReport | None) -> bool:
    """Whether a failed run's version was one its checks blocked (``QualityBlocked``), not one whose quality step
    crashed: its report says a ``block`` rule failed; without the report (gone with the run's prefix before a
    redelivered failure), its reason names ``QualityBlocked``."""
    if failed_step != "quality":
        return False
    return report.blocked if report is not None else QualityBlocked.__name__ in reason


def published_report(
    gate: QualityGate | None, published: bool, store: ObjectStore, target_location: str
) -> QualityReport | None:
    """The report of the version a run published (kept beside it while it is published), for its post-update's
    metric and COMPLETE events; ``None`` without checks, for a run that published nothing (it routes another's
    version again), or when the report cannot be read (then the run's end goes on without it, logged)."""
    if gate is None or not published:
        return None
    try:
        return read_report(store, target_location)
    except Exception as error:  # any store's: lineage and a metric never fail the run's end
        logger.warning("quality: the report of %s could not be read: %s", target_location, error)
        return None


def warned_rules(report: QualityReport | None) -> int:
    """The ``warn`` rules a published version failed."""
    return 0 if report is None else len([result for result in report.failed if result.severity == "warn"])


def read_report(store: ObjectStore, target_location: str) -> QualityReport | None:
    """The report of the run writing ``target_location``, ``None`` if its quality step did not run (no checks,
    or it failed before it reported)."""
    try:
        return report_from_json(store.read_text(report_location(target_location)))
    except ObjectMissing:
        return None


class QualityFiles(Protocol):
    """What the quality step reads and writes besides the engine's tables: an ``ObjectStore``, or in the Glue
    job the files as its Spark sees them (``lakeline.glue_jobs.stage_job.HadoopFiles``)."""

    def list_data_files(self, location: str) -> list[str]: ...

    def write_text(self, location: str, text: str) -> None: ...


def run_quality(
    gate: QualityGate,
    *,
    target_location: str,
    engine: Engine,
    store: QualityFiles,
    carry_from: str | None = None,
    replaces: Collection[str] = (),
) -> QualityReport:
    """Check the version the run writing ``target_location`` would commit (``carry_from``: the published prefix
    whose files the commit carries, but ``replaces``); write the report beside the run; ``QualityBlocked`` if a
    ``block`` rule failed. A query the engine refuses is raised as it is (the step fails, the run is parked)."""
    schema = engine.describe_table(gate.database, gate.table)
    if (schema.format or "").lower() not in READ_FORMATS:
        raise InvalidInputError(
            f"quality checks read PARQUET, ORC or JSON tables; {gate.database}.{gate.table} is {schema.format}"
        )
    files = store.list_data_files(target_location)
    if carry_from is not None:
        files += [path for path in store.list_data_files(carry_from) if file_name(path) not in replaces]
    folder, text = manifest_object(manifest_prefix(target_location), sorted(files))
    store.write_text(folder + MANIFEST_OBJECT, text)
    columns = [(column.name, column.type) for column in schema.columns]
    create = symlink_table_ddl(
        schema, database=gate.database, table=gate.quality_table, columns=columns, manifest=folder
    )
    drop = f"DROP TABLE IF EXISTS {ddl_name(gate.database, gate.quality_table)}"
    _execute(engine, drop, gate.database)  # a retried step's table, if its drop did not run
    _execute(engine, create, gate.database)
    try:
        version = TableRef(gate.database, gate.quality_table)
        published = TableRef.of(gate.database, gate.table, gate.partition)
        report = evaluate(gate.checks, engine, version, published)
    finally:
        _execute(engine, drop, gate.database)
    where = " and ".join(f"{column}={value}" for column, value in gate.partition.items())
    report = QualityReport(f"{gate.database}.{gate.table}" + (f" ({where})" if where else ""), report.results)
    store.write_text(report_location(target_location), report_to_json(report))
    for result in report.failed:
        if result.severity == "warn":
            logger.warning("quality: %s: %s (published all the same)", report.table, _described(result))
    if report.blocked:
        raise QualityBlocked(report)
    return report


def _execute(engine: Engine, sql: str, database: str) -> QueryResult:
    return engine.execute(sql, database=database)
