"""Who produces Lakeline's OpenLineage events, and with which engine: the producer URL, versions.

The spec asks every event and every facet for a ``producer`` URI naming the code that made it.
openlineage-python's facet classes default to the client's own URL; ``owned`` puts Lakeline's on them.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from openlineage.client.event_v2 import RunEvent

import lakeline

PROJECT_URL = "https://github.com/lakeline/lakeline"


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


LAKELINE_VERSION = lakeline.__version__
"""The one source of truth (pyproject.toml reads it too): a Lambda bundle has no ``lakeline`` dist-info."""
PRODUCER = f"{PROJECT_URL}/tree/v{LAKELINE_VERSION}"
"""Lakeline's producer URL, versioned the way OpenLineage's own integrations are."""

ATHENA_ENGINE_VERSION = "Athena engine version 3"
"""What the workgroup's ``AUTO`` engine version selects (``stacks/constructs/athena.py``)."""


GLUE_SPARK_VERSIONS = {
    "0.9": "2.2.1",
    "1.0": "2.4.3",
    "2.0": "2.4.3",
    "3.0": "3.1.1",
    "4.0": "3.3.0",
    "5.0": "3.5.4",
    "5.1": "3.5.6",
}
"""The Spark each AWS Glue version runs, as AWS documents it (AWS Glue Developer Guide, "AWS Glue versions")."""


def glue_spark_version(glue_version: str | None) -> str | None:
    """The Spark version a Glue job of ``glue_version`` runs on, if Lakeline knows that Glue version."""
    return GLUE_SPARK_VERSIONS.get(glue_version.strip()) if glue_version else None


def engine_version(engine: str | None) -> str | None:
    """The version of the engine that runs the steps in this process: PySpark's installed version, Athena's
    engine version. A deployed function runs no Spark itself: the stack tells it the Glue job's Spark."""
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
