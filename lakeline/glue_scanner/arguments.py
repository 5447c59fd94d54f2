"""Job arguments as a Glue job run sees them.

A run's arguments are the job's ``DefaultArguments``, overridden by the run's own arguments, with the
job's ``NonOverridableArguments`` winning over both. Glue adds ``--JOB_NAME`` itself. Keys are written
``--NAME``; ``getResolvedOptions(sys.argv, ["NAME"])`` reads them back as ``args["NAME"]``.

Two arguments set up the script's Python environment: ``--extra-py-files`` (comma-separated S3 paths of
.py files or .zip archives put on the path) and ``--additional-python-modules`` (comma-separated pip
requirements or S3 paths of wheels/zips).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakeline.errors import InvalidInputError

EXTRA_PY_FILES = "--extra-py-files"
ADDITIONAL_PYTHON_MODULES = "--additional-python-modules"


def argument_key(name: str) -> str:
    """``NAME`` or ``--NAME`` as Glue's key, ``--NAME``."""
    return name if name.startswith("--") else f"--{name}"


def string_arguments(raw: Any, where: str) -> dict[str, str]:
    """A mapping of argument names to strings; keys get their ``--`` prefix."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{where} must be a mapping of argument names to values, got {type(raw).__name__}")
    result = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key.strip("-"):
            raise InvalidInputError(f"{where}: argument name {key!r} is not a name")
        if not isinstance(value, str | int | float | bool):
            raise InvalidInputError(f"{where}: argument {key} must be a string, got {type(value).__name__}")
        result[argument_key(key)] = value if isinstance(value, str) else str(value).lower()
    return result


def run_arguments_document(document: Any, where: str) -> dict[str, str]:
    """Per-run arguments: a flat mapping, ``{"Arguments": {...}}`` or ``aws glue get-job-run`` output."""
    if isinstance(document, Mapping) and isinstance(document.get("JobRun"), Mapping):
        return string_arguments(document["JobRun"].get("Arguments"), where)
    if isinstance(document, Mapping) and isinstance(document.get("Arguments"), Mapping):
        return string_arguments(document["Arguments"], where)
    return string_arguments(document, where)


def effective_arguments(
    job_name: str,
    default: Mapping[str, str],
    run: Mapping[str, str],
    non_overridable: Mapping[str, str],
) -> dict[str, str]:
    arguments = {"--JOB_NAME": job_name}
    arguments.update({argument_key(k): v for k, v in default.items()})
    arguments.update({argument_key(k): v for k, v in run.items()})
    arguments.update({argument_key(k): v for k, v in non_overridable.items()})
    return arguments


def comma_list(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


@dataclass(frozen=True)
class PythonModules:
    """``--additional-python-modules`` split into files to fetch and pip requirements."""

    s3_paths: tuple[str, ...]
    requirements: tuple[str, ...]


def python_modules(value: str | None) -> PythonModules:
    items = comma_list(value)
    return PythonModules(
        tuple(item for item in items if item.startswith("s3://")),
        tuple(item for item in items if not item.startswith("s3://")),
    )


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` as (bucket, key)."""
    if not uri.startswith("s3://"):
        raise InvalidInputError(f"{uri!r} is not an S3 path (s3://bucket/key)")
    bucket, _, key = uri[len("s3://") :].partition("/")
    if not bucket or not key:
        raise InvalidInputError(f"{uri!r} names no object: write s3://bucket/key")
    return bucket, key
