"""The quality gates' metrics as the stages' failure and post-update functions emit them
(``lakeline.quality.metrics``): one EMF document per metric, with the gates' own dimensions rather than the
function's ``service``, so that the alarm on blocked versions sees both stages as one metric."""

from __future__ import annotations

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from lakeline.quality.metrics import DIMENSIONS, METRICS_NAMESPACE


def emit_quality_metric(name: str, value: int) -> None:
    """Emit ``value`` of the gates' metric ``name`` (nothing for 0: a run without checks says nothing)."""
    if value <= 0:
        return
    with single_metric(
        name=name, unit=MetricUnit.Count, value=value, namespace=METRICS_NAMESPACE, default_dimensions=dict(DIMENSIONS)
    ):
        pass
