"""Every function's Powertools objects, made one way: created once per container, at import, and shared by its
handler's decorators and its code (DESIGN.md, "Examples worth following")."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

from lakeline.names import METRICS_NAMESPACE


def observability(service: str, *, metrics_service: str | None = None) -> tuple[Logger, Tracer, Metrics]:
    """The ``Logger`` and ``Tracer`` of ``service`` and its ``Metrics`` in ``METRICS_NAMESPACE``, whose service
    dimension is ``metrics_service`` where several functions log as one service (the lineage functions)."""
    return (
        Logger(service=service),
        Tracer(service=service),
        Metrics(namespace=METRICS_NAMESPACE, service=metrics_service or service),
    )
