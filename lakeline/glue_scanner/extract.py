"""``lakeline glue extract``: the Glue Data Catalog and Glue jobs of one account and region, to disk.

Everything is written as the aws cli prints it (``get-databases``, ``get-tables``, ``get-job``), with
timestamps as ISO 8601 strings, in the layout of ``folder``. Each job's script, its ``--extra-py-files``
and the S3 files of its ``--additional-python-modules`` are downloaded next to its configuration; pip
requirements are listed in ``requirements.txt``. A failure (access denied, a missing script) is recorded
for the database or job it concerns and the extraction goes on. Every file is written whole or not at
all, and a job's folder is replaced only once it is complete.

The clients are passed in (``boto3`` Glue and S3 clients), so the caller decides region, profile and
retries.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from lakeline.errors import InvalidInputError
from lakeline.glue_scanner.arguments import (
    ADDITIONAL_PYTHON_MODULES,
    EXTRA_PY_FILES,
    comma_list,
    python_modules,
    split_s3_uri,
    string_arguments,
)
from lakeline.glue_scanner.folder import (
    CONNECTION_FILE,
    CONNECTIONS_FILE,
    DATABASES_FILE,
    EXTRA_PY_DIR,
    JOB_FILE,
    JOBS_DIR,
    LIBRARIES_DIR,
    REQUIREMENTS_FILE,
    safe_name,
    tables_file,
    write_atomic,
    write_folder_json,
)


class ProgressListener(Protocol):
    def phase(self, description: str, total: int) -> None: ...

    def advance(self, item: str) -> None: ...


class _Silent:
    def phase(self, description: str, total: int) -> None:
        return None

    def advance(self, item: str) -> None:
        return None


@dataclass(frozen=True)
class ExtractError:
    scope: str
    """What failed: ``catalog``, ``database <name>`` or ``job <name>``."""
    message: str

    def __str__(self) -> str:
        return f"{self.scope}: {self.message}"


@dataclass
class ExtractReport:
    databases: int = 0
    tables: int = 0
    connections: int = 0
    jobs: list[str] = field(default_factory=list)
    errors: list[ExtractError] = field(default_factory=list)


def aws_json(value: Any) -> Any:
    """A boto3 response as the aws cli prints it: timestamps as ISO 8601, no response metadata."""
    if isinstance(value, Mapping):
        return {str(k): aws_json(v) for k, v in value.items() if k != "ResponseMetadata"}
    if isinstance(value, list | tuple):
        return [aws_json(item) for item in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def _describe(error: Exception) -> str:
    if isinstance(error, ClientError):
        details = error.response.get("Error", {})
        return f"{details.get('Code', 'Error')}: {details.get('Message') or error}"
    return str(error)


def _pages(client: Any, operation: str, key: str, **parameters: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for page in client.get_paginator(operation).paginate(**parameters):
        items.extend(page.get(key, []))
    return items


def extract_catalog(glue: Any, out: Path, report: ExtractReport, progress: ProgressListener) -> None:
    try:
        databases = _pages(glue, "get_databases", "DatabaseList")
    except (ClientError, BotoCoreError) as error:
        report.errors.append(ExtractError("catalog", f"cannot list databases: {_describe(error)}"))
        return
    write_folder_json(out / DATABASES_FILE, {"DatabaseList": aws_json(databases)})
    report.databases = len(databases)
    progress.phase("catalog", len(databases))
    for database in databases:
        name = str(database["Name"])
        try:
            tables = _pages(glue, "get_tables", "TableList", DatabaseName=name)
        except (ClientError, BotoCoreError) as error:
            report.errors.append(ExtractError(f"database {name}", f"cannot list tables: {_describe(error)}"))
        else:
            write_folder_json(out / tables_file(name), {"TableList": aws_json(tables)})
            report.tables += len(tables)
        progress.advance(name)


_SECRET = re.compile(r"PASSWORD|SECRET|TOKEN|KEYSTORE|PRIVATE|CREDENTIAL", re.IGNORECASE)


def without_secrets(value: Any) -> Any:
    """A connection with every password-like property left out (``HidePassword`` hides only some)."""
    if isinstance(value, Mapping):
        return {k: without_secrets(v) for k, v in value.items() if not _SECRET.search(str(k))}
    if isinstance(value, list):
        return [without_secrets(item) for item in value]
    return value


def extract_connections(glue: Any, out: Path, report: ExtractReport) -> None:
    """Glue Connections, for the JDBC URLs and brokers that name the data of jobs and catalog tables."""
    try:
        connections = _pages(glue, "get_connections", "ConnectionList", HidePassword=True)
    except (ClientError, BotoCoreError) as error:
        report.errors.append(ExtractError("connections", f"cannot list connections: {_describe(error)}"))
        return
    write_folder_json(out / CONNECTIONS_FILE, {"ConnectionList": without_secrets(aws_json(connections))})
    report.connections = len(connections)


def _download(s3: Any, uri: str, target: Path) -> None:
    bucket, key = split_s3_uri(uri)
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    write_atomic(target, body)


def _job_arguments(job: Mapping[str, Any]) -> dict[str, str]:
    name = str(job.get("Name"))
    arguments = string_arguments(job.get("DefaultArguments"), f"{name} DefaultArguments")
    arguments.update(string_arguments(job.get("NonOverridableArguments"), f"{name} NonOverridableArguments"))
    return arguments


def extract_job(s3: Any, job: Mapping[str, Any], jobs_dir: Path) -> list[str]:
    """Write one job's folder; the problems met, each naming what could not be fetched."""
    problems: list[str] = []
    jobs_dir.mkdir(parents=True, exist_ok=True)
    final = jobs_dir / safe_name(str(job["Name"]))
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=jobs_dir))
    try:
        write_folder_json(staging / JOB_FILE, {"Job": aws_json(job)})
        location = str((job.get("Command") or {}).get("ScriptLocation") or "")
        downloads: list[tuple[str, str, Path]] = []
        if location:
            downloads.append(("script", location, staging / location.rstrip("/").rsplit("/", 1)[-1]))
        else:
            problems.append("the job names no script (Command.ScriptLocation)")
        try:
            arguments = _job_arguments(job)
        except InvalidInputError as error:
            problems.append(str(error))
            arguments = {}
        for uri in comma_list(arguments.get(EXTRA_PY_FILES)):
            downloads.append(("extra file", uri, staging / EXTRA_PY_DIR / uri.rsplit("/", 1)[-1]))
        modules = python_modules(arguments.get(ADDITIONAL_PYTHON_MODULES))
        for uri in modules.s3_paths:
            downloads.append(("python module", uri, staging / LIBRARIES_DIR / uri.rsplit("/", 1)[-1]))
        if modules.requirements:
            write_atomic(staging / REQUIREMENTS_FILE, ("\n".join(modules.requirements) + "\n").encode("utf-8"))
        for what, uri, target in downloads:
            try:
                _download(s3, uri, target)
            except (ClientError, BotoCoreError, InvalidInputError) as error:
                problems.append(f"cannot fetch {what} {uri}: {_describe(error)}")
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return problems


def extract(
    glue: Any,
    s3: Any,
    out: Path,
    *,
    region: str | None,
    account: str | None = None,
    jobs_pattern: str = "*",
    progress: ProgressListener | None = None,
) -> ExtractReport:
    """Extract catalog and matching jobs into ``out``; see the module docstring."""
    listener = progress or _Silent()
    report = ExtractReport()
    out.mkdir(parents=True, exist_ok=True)
    write_folder_json(out / CONNECTION_FILE, {"Region": region, "AccountId": account})
    extract_catalog(glue, out, report, listener)
    extract_connections(glue, out, report)
    try:
        jobs = [job for job in _pages(glue, "get_jobs", "Jobs") if fnmatch.fnmatchcase(str(job["Name"]), jobs_pattern)]
    except (ClientError, BotoCoreError) as error:
        report.errors.append(ExtractError("jobs", f"cannot list jobs: {_describe(error)}"))
        return report
    listener.phase("jobs", len(jobs))
    for job in jobs:
        name = str(job["Name"])
        problems = extract_job(s3, job, out / JOBS_DIR)
        report.jobs.append(name)
        report.errors.extend(ExtractError(f"job {name}", problem) for problem in problems)
        listener.advance(name)
    return report
