"""A quality report (#41) as OpenLineage facets of the dataset it checked.

- ``dataQualityAssertions`` (``DataQualityAssertionsDatasetFacet``, spec 1-1-0, an *input* dataset facet): one
  assertion per rule: ``assertion`` the DQDL rule type (``IsComplete``, ``RowCount``, ...), ``column`` the rule's
  column if it has one, ``success`` whether it passed, ``severity`` ``error`` for a ``block`` rule (its failure
  blocks the pipeline) or ``warn``, ``content`` the rule as written (``contentType`` ``dqdl``), ``actual`` its metric
  and ``description`` why it has none. The failing rows a rule found stay in the report (``quality.json``) and the
  parked input's reason: a facet has no field for them, and they may be large.
- ``dataQualityMetrics`` (``DataQualityMetricsDatasetFacet``, 1-0-1, a dataset facet): what the checks measured of
  the version as counts: ``rowCount`` from a ``RowCount`` rule, and with it each ``IsComplete`` column's
  ``nullCount`` and each fully unique ``IsUnique`` column's ``distinctCount``. Nothing is measured for the facet
  alone; without a ``RowCount`` rule there is no such facet.

A table's checks are bounded (``lakeline.quality.checks``: 100 rules, 64,000 bytes of rule text), and each rule's
text travels once, so the facets of the largest report stay far under an event's 300,000 bytes
(``lakeline.lineage.openlineage.bound``).
"""

from __future__ import annotations

from typing import Any

from openlineage.client.facet_v2 import data_quality_assertions_dataset, data_quality_metrics_dataset

from lakeline.quality.dqdl import parse_rule
from lakeline.quality.evaluate import CheckResult, QualityReport
from lakeline.quality.rules import IsComplete, IsUnique, RowCount

SEVERITIES = {"block": "error", "warn": "warn"}
"""Lakeline's severities as the facet's common values: a failed ``error`` assertion blocks the pipeline."""
CONTENT_TYPE = "dqdl"


def assertion(result: CheckResult) -> data_quality_assertions_dataset.Assertion:
    rule = parse_rule(result.rule)
    return data_quality_assertions_dataset.Assertion(
        assertion=type(rule).__name__,
        success=result.passed,
        column=getattr(rule, "column", None),
        severity=SEVERITIES[result.severity],
        actual=None if result.metric is None else f"{result.metric:g}",
        description=result.note or None,
        content=result.rule,
        contentType=CONTENT_TYPE,
        params=None,
    )


def assertions_facet(report: QualityReport) -> data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet:
    return data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet(
        assertions=[assertion(result) for result in report.results]
    )


def metrics_facet(report: QualityReport) -> data_quality_metrics_dataset.DataQualityMetricsDatasetFacet | None:
    """The counts the checks measured, ``None`` without a measured ``RowCount`` rule."""
    parsed = [(parse_rule(result.rule), result) for result in report.results]
    rows = next((r.metric for rule, r in parsed if isinstance(rule, RowCount) and r.metric is not None), None)
    if rows is None:
        return None
    columns: dict[str, data_quality_metrics_dataset.ColumnMetrics] = {}
    for rule, result in parsed:
        if result.metric is None:
            continue
        if isinstance(rule, IsComplete):
            nulls = round(rows * (1 - result.metric))
            columns[rule.column] = _with(columns.get(rule.column), nullCount=nulls)
        elif isinstance(rule, IsUnique) and result.metric == 1:
            columns[rule.column] = _with(columns.get(rule.column), distinctCount=round(rows))
    return data_quality_metrics_dataset.DataQualityMetricsDatasetFacet(rowCount=round(rows), columnMetrics=columns)


def _with(metrics: data_quality_metrics_dataset.ColumnMetrics | None, **counts: int) -> Any:
    found = metrics or data_quality_metrics_dataset.ColumnMetrics(quantiles=None)
    for name, value in counts.items():
        setattr(found, name, value)
    return found


def quality_facets(report: QualityReport) -> tuple[dict[str, Any], dict[str, Any]]:
    """The checked dataset's facets and input facets from ``report``."""
    metrics = metrics_facet(report)
    return ({"dataQualityMetrics": metrics} if metrics else {}), {"dataQualityAssertions": assertions_facet(report)}
