"""Who produces Lakeline's OpenLineage events, and with which engine: the producer URL, versions.

The spec asks every event and every facet for a ``producer`` URI naming the code that made it.
openlineage-python's facet classes default to the client's own URL; ``owned`` puts Lakeline's on them.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from openlineage.client.event_v2 import RunEvent

PROJECT_URL = "https://github.com/lakeline/lakeline"


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


LAKELINE_VERSION = _version("lakeline") or "0.0.0"
PRODUCER = f"{PROJECT_URL}/tree/v{LAKELINE_VERSION}"
"""Lakeline's producer URL, versioned the way OpenLineage's own integrations are."""

ATHENA_ENGINE_VERSION = "Athena engine version 3"
"""What the workgroup's ``AUTO`` engine version selects (``stacks/constructs/athena.py``)."""


def engine_version(engine: str | None) -> str | None:
    """The version of the engine that runs the steps: PySpark's installed version, Athena's engine version."""
    if engine == "spark":
        version = _version("pyspark")
        if version is None:  # on Glue, PySpark is on the path without package metadata
            try:
                import pyspark
            except ImportError:
                return None
            version = str(pyspark.__version__)
        return version
    if engine == "athena":
        return ATHENA_ENGINE_VERSION
    return None


def owned(event: RunEvent) -> RunEvent:
    """``event`` with Lakeline's producer on each of its facets (run, job, inputs, outputs)."""
    holders: list[dict[str, Any] | None] = [event.run.facets, event.job.facets]
    holders += [dataset.facets for dataset in (*(event.inputs or []), *(event.outputs or []))]
    holders += [dataset.inputFacets for dataset in event.inputs or []]
    holders += [dataset.outputFacets for dataset in event.outputs or []]
    for facets in holders:
        for facet in (facets or {}).values():
            facet._producer = PRODUCER
    return event
