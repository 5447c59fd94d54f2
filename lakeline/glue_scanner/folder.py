"""The connection folder: what ``lakeline glue extract`` writes and what a user can write by hand.

```
DIR/                              one Glue connection (an account and region)
  connection.json                 {"Region": ..., "AccountId": ...} (optional)
  databases.json                  aws glue get-databases output  {"DatabaseList": [...]}
  connections.json                aws glue get-connections output {"ConnectionList": [...]}, no secrets
  tables.<database>.json          aws glue get-tables output      {"TableList": [...]}
  jobs/<job>/                     one folder per job
    job.json                      aws glue get-job output         {"Job": {...}}
    <script>.py                   the script named by Command.ScriptLocation
    arguments.json                per-run arguments (optional, written by the user)
    extra-py-files/               the files of --extra-py-files
    libraries/                    S3 files of --additional-python-modules
    requirements.txt              pip names of --additional-python-modules
  lineage/openlineage.jsonl       written by ``lakeline glue lineage``
```

By hand, any top-level ``*.json`` holding ``TableList`` (or ``Table``, ``DatabaseList``) is read as
catalog, and a job folder needs only its script: without ``job.json`` the job is named after its folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakeline.errors import InvalidInputError
from lakeline.glue_scanner.arguments import (
    EXTRA_PY_FILES,
    comma_list,
    effective_arguments,
    run_arguments_document,
    string_arguments,
)
from lakeline.glue_scanner.catalog import GlueCatalog

CONNECTION_FILE = "connection.json"
CONNECTIONS_FILE = "connections.json"
DATABASES_FILE = "databases.json"
JOBS_DIR = "jobs"
JOB_FILE = "job.json"
ARGUMENTS_FILE = "arguments.json"
EXTRA_PY_DIR = "extra-py-files"
LIBRARIES_DIR = "libraries"
REQUIREMENTS_FILE = "requirements.txt"
LINEAGE_DIR = "lineage"
EVENTS_FILE = "openlineage.jsonl"


def tables_file(database: str) -> str:
    return f"tables.{safe_name(database)}.json"


def safe_name(name: str) -> str:
    """A file or folder name for a Glue name (which may hold spaces or slashes)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    if cleaned == name:
        return name
    # Different names must not clean up to the same folder.
    return f"{cleaned or 'job'}-{hashlib.sha1(name.encode('utf-8')).hexdigest()[:8]}"


def write_atomic(path: Path, data: bytes) -> None:
    """Write the whole file or nothing: a temporary file in the same folder, then a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        Path(temporary).replace(path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_folder_json(path: Path, document: Any) -> None:
    write_atomic(path, (json.dumps(document, indent=2, sort_keys=False) + "\n").encode("utf-8"))


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise InvalidInputError(f"cannot read {path}: {error}") from error


@dataclass(frozen=True)
class JobFolder:
    name: str
    path: Path
    config: dict[str, Any]
    """The job's ``Job`` structure (``{}`` for a folder holding only a script)."""
    script: Path | None
    run_arguments: dict[str, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    """Why the job cannot be analysed (no script, a Scala job), if it cannot."""

    @property
    def script_location(self) -> str | None:
        command = self.config.get("Command") or {}
        location = command.get("ScriptLocation")
        return str(location) if location else None

    @property
    def glue_version(self) -> str | None:
        version = self.config.get("GlueVersion")
        return str(version) if version else None

    def arguments(self, extra_run_arguments: dict[str, str] | None = None) -> dict[str, str]:
        """Arguments of a run: defaults, this folder's run arguments, then ``extra_run_arguments``."""
        run = {**self.run_arguments, **(extra_run_arguments or {})}
        return effective_arguments(
            self.name,
            string_arguments(self.config.get("DefaultArguments"), f"{self.name} DefaultArguments"),
            run,
            string_arguments(self.config.get("NonOverridableArguments"), f"{self.name} NonOverridableArguments"),
        )

    def module_files(self) -> list[Path]:
        """Files whose Python modules the script may import: extra .py files, zips and wheels."""
        found = []
        for folder in (self.path / EXTRA_PY_DIR, self.path / LIBRARIES_DIR):
            if folder.is_dir():
                found.extend(sorted(p for p in folder.iterdir() if p.suffix in (".py", ".zip", ".whl")))
        return found

    def missing_extra_files(self, arguments: dict[str, str]) -> list[str]:
        present = (
            {p.name for p in (self.path / EXTRA_PY_DIR).glob("*")} if (self.path / EXTRA_PY_DIR).is_dir() else set()
        )
        return [item for item in comma_list(arguments.get(EXTRA_PY_FILES)) if item.rsplit("/", 1)[-1] not in present]


@dataclass(frozen=True)
class GlueFolder:
    root: Path
    region: str | None
    catalog: GlueCatalog
    jobs: tuple[JobFolder, ...]
    account: str | None = None


def _job_config(document: Any, where: Path) -> dict[str, Any]:
    if isinstance(document, dict) and isinstance(document.get("Job"), dict):
        document = document["Job"]
    if not isinstance(document, dict) or not isinstance(document.get("Name"), str):
        raise InvalidInputError(f'{where} must be \'aws glue get-job\' output: {{"Job": {{"Name": ...}}}}')
    return document


def _script_of(folder: Path, config: dict[str, Any]) -> tuple[Path | None, tuple[str, ...]]:
    command = config.get("Command") or {}
    location = str(command.get("ScriptLocation") or "")
    if location:
        candidate = folder / location.rstrip("/").rsplit("/", 1)[-1]
        if candidate.is_file():
            return candidate, ()
    scripts = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in (".py", ".scala"))
    if len(scripts) == 1:
        return scripts[0], ()
    if not scripts:
        named = f" ({location})" if location else ""
        return None, (f"the job's script{named} is not in {folder}",)
    names = ", ".join(p.name for p in scripts)
    return None, (f"{folder} holds several scripts ({names}) and job.json names none of them",)


def load_job(folder: Path) -> JobFolder:
    config: dict[str, Any] = {}
    if (folder / JOB_FILE).is_file():
        config = _job_config(read_json(folder / JOB_FILE), folder / JOB_FILE)
    name = str(config.get("Name") or folder.name)
    script, problems = _script_of(folder, config)
    run_arguments: dict[str, str] = {}
    if (folder / ARGUMENTS_FILE).is_file():
        run_arguments = run_arguments_document(read_json(folder / ARGUMENTS_FILE), str(folder / ARGUMENTS_FILE))
    language = str((config.get("DefaultArguments") or {}).get("--job-language") or "python").lower()
    if script is not None and (script.suffix == ".scala" or language == "scala"):
        problems = (*problems, "Scala scripts are not analysed")
    return JobFolder(name, folder, config, script, run_arguments, problems)


def _catalog_files(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*.json") if p.is_file() and p.name != CONNECTION_FILE)


def load_folder(root: Path) -> GlueFolder:
    """Read a connection folder, extracted or written by hand."""
    if not root.is_dir():
        raise InvalidInputError(f"{root} is not a folder")
    region = account = None
    if (root / CONNECTION_FILE).is_file():
        connection = read_json(root / CONNECTION_FILE)
        if isinstance(connection, dict):
            region = str(connection["Region"]) if connection.get("Region") else None
            account = str(connection["AccountId"]) if connection.get("AccountId") else None
    catalog = GlueCatalog.load_files(_catalog_files(root))
    jobs_root = root / JOBS_DIR
    jobs = tuple(
        load_job(folder)
        for folder in (sorted(p for p in jobs_root.iterdir() if p.is_dir()) if jobs_root.is_dir() else [])
        if not folder.name.startswith(".")
    )
    names = [job.name for job in jobs]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise InvalidInputError(f"several job folders hold the job {', '.join(duplicates)}")
    return GlueFolder(root, region, catalog, jobs, account)
