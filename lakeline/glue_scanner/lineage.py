"""``lakeline glue lineage``: analyse every job of a connection folder and store its RunEvent.

Each job's script is analysed with the run's arguments (defaults, then the job folder's
``arguments.json``, then the ones passed in, with ``NonOverridableArguments`` over all of them) and its
extra .py files and zips importable. The events are written as JSON lines to
``<DIR>/lineage/openlineage.jsonl`` (replaced whole on each run) and, when an OpenLineage transport is
configured, sent through it as well.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from openlineage.client.event_v2 import RunEvent, RunState

from lakeline.errors import InvalidInputError, LakelineError
from lakeline.glue_scanner.arguments import ADDITIONAL_PYTHON_MODULES, python_modules, string_arguments
from lakeline.glue_scanner.column_exprs import Problem
from lakeline.glue_scanner.events import JobRun, job_event
from lakeline.glue_scanner.folder import (
    EVENTS_FILE,
    LINEAGE_DIR,
    REQUIREMENTS_FILE,
    GlueFolder,
    JobFolder,
    read_json,
    write_atomic,
)
from lakeline.glue_scanner.job_modules import module_sources
from lakeline.glue_scanner.script import analyse_script
from lakeline.glue_scanner.script_analysis import ScriptAnalysis, ScriptContext
from lakeline.lineage.openlineage.config import OpenLineageSettings
from lakeline.lineage.openlineage.emitter import LineageEmitter
from lakeline.lineage.openlineage.events import event_to_dict, now, stable_run_id
from lakeline.lineage.openlineage.naming import DatasetNaming


@dataclass(frozen=True)
class JobResult:
    name: str
    analysis: ScriptAnalysis | None = None
    unresolved: tuple[Problem, ...] = ()
    event: RunEvent | None = None
    """The COMPLETE event of the job's run; ``start`` is its START."""
    error: str | None = None
    """Why the job could not be analysed at all (no script, a syntax error, a Scala job)."""
    start: RunEvent | None = None

    @property
    def events(self) -> list[RunEvent]:
        """The job run's events in order: START, then COMPLETE."""
        return [event for event in (self.start, self.event) if event is not None]


def load_run_arguments(path: Path) -> dict[str, dict[str, str]]:
    """``{"job name": {"--NAME": "value"}}``: per-run arguments of several jobs in one file."""
    document = read_json(path)
    if not isinstance(document, dict):
        raise InvalidInputError(f"{path} must map job names to their run arguments")
    return {str(job): string_arguments(arguments, f"{path}, job {job}") for job, arguments in document.items()}


def _requirement_name(requirement: str) -> str:
    name = re.split(r"[\s\[=<>~!;@]", requirement.strip(), maxsplit=1)[0]
    return name.lower().replace("-", "_")


def _libraries(job: JobFolder, arguments: Mapping[str, str]) -> frozenset[str]:
    names = set(python_modules(arguments.get(ADDITIONAL_PYTHON_MODULES)).requirements)
    requirements = job.path / REQUIREMENTS_FILE
    if requirements.is_file():
        names.update(line for line in requirements.read_text(encoding="utf-8").splitlines() if line.strip())
    return frozenset(_requirement_name(name) for name in names if not name.strip().startswith("#"))


def analyse_job(job: JobFolder, folder: GlueFolder, run_arguments: Mapping[str, str]) -> JobResult:
    if job.problems or job.script is None:
        return JobResult(job.name, error="; ".join(job.problems) or "the job has no script")
    try:
        arguments = job.arguments(dict(run_arguments))
        context = ScriptContext(
            job_name=job.name,
            arguments=arguments,
            catalog=folder.catalog,
            modules=module_sources(job.module_files()),
            libraries=_libraries(job, arguments),
            region=folder.region,
            account=folder.account,
        )
        analysis = analyse_script(job.script.read_text(encoding="utf-8"), job.script.name, context)
    except (LakelineError, OSError, UnicodeDecodeError) as error:
        return JobResult(job.name, error=str(error))
    for missing in job.missing_extra_files(arguments):
        analysis.problems.append(Problem(0, f"extra file {missing} is not in the job folder: imports from it fail"))
    return JobResult(job.name, analysis, tuple(analysis.unresolved()))


def analyse_folder(
    folder: GlueFolder,
    *,
    settings: OpenLineageSettings,
    naming: DatasetNaming,
    run_arguments: Mapping[str, Mapping[str, str]] | None = None,
    jobs_pattern: str = "*",
    clock: Callable[[], datetime] = now,
) -> list[JobResult]:
    """Every matching job analysed, with its event when it could be."""
    run_arguments = run_arguments or {}
    unknown = sorted(set(run_arguments) - {job.name for job in folder.jobs})
    if unknown:
        raise InvalidInputError(f"run arguments are given for jobs not in {folder.root}: {', '.join(unknown)}")
    results = []
    for job in folder.jobs:
        if not fnmatch.fnmatchcase(job.name, jobs_pattern):
            continue
        started = clock()
        result = analyse_job(job, folder, run_arguments.get(job.name, {}))
        if result.analysis is not None and job.script is not None:
            at = clock()
            run = JobRun(
                job_name=job.name,
                run_id=stable_run_id(started, f"glue/{job.name}"),
                analysis=result.analysis,
                unresolved=result.unresolved,
                script=job.script.read_text(encoding="utf-8"),
                script_location=job.script_location,
                glue_version=job.glue_version,
            )
            made = functools.partial(job_event, run, catalog=folder.catalog, naming=naming, settings=settings)
            start, event = made(at=started, state=RunState.START), made(at=at)
            result = JobResult(result.name, result.analysis, result.unresolved, event, start=start)
        results.append(result)
    return results


def default_events_path(folder: GlueFolder) -> Path:
    return folder.root / LINEAGE_DIR / EVENTS_FILE


def store_events(events: Sequence[RunEvent], path: Path, settings: OpenLineageSettings) -> LineageEmitter:
    """Send the events if a transport is set, and write them as JSON lines (the whole file at once): as the
    emitter keeps them, an event over the bound in parts (``lineage.openlineage.bound``), so the file holds
    what was sent."""
    emitter = LineageEmitter(settings)
    for event in events:
        emitter.emit(event)
    lines = "".join(json.dumps(event_to_dict(event), sort_keys=True) + "\n" for event in emitter.drain())
    write_atomic(path, lines.encode("utf-8"))
    emitter.close()
    return emitter
