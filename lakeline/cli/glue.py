"""``lakeline glue ...`` commands.

- ``extract --region R [--profile P] [--jobs PATTERN] --out DIR``: catalog and jobs to a folder.
- ``lineage DIR [--arguments FILE] [--jobs PATTERN] [--json]``: lineage of every job's script, stored
  as OpenLineage events in ``DIR/lineage/openlineage.jsonl`` (and sent if a transport is configured).

Exit codes: 0 success; 1 something could not be extracted or a job could not be analysed; 2 bad usage
or configuration.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import boto3
import typer
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ProfileNotFound
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn
from rich.table import Table
from rich.text import Text

from lakeline import logs
from lakeline.console import EXIT_FAILED, fail
from lakeline.errors import ConfigError, LakelineError
from lakeline.glue_scanner.extract import extract
from lakeline.glue_scanner.folder import load_folder
from lakeline.glue_scanner.lineage import (
    JobResult,
    analyse_folder,
    default_events_path,
    load_run_arguments,
    store_events,
)
from lakeline.lineage.openlineage.config import load_openlineage_settings
from lakeline.lineage.openlineage.events import event_to_dict
from lakeline.lineage.openlineage.naming import glue_dump_naming

glue_app = typer.Typer(
    help="Glue scanner: extract catalog and jobs, derive lineage from job scripts.", no_args_is_help=True
)

_err = Console(stderr=True)
_out = Console()


class _RichProgress:
    """Extraction progress on stderr: one bar per phase (catalog databases, then jobs)."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task: TaskID | None = None

    def phase(self, description: str, total: int) -> None:
        if self.task is not None:
            self.progress.update(self.task, visible=False)
        self.task = self.progress.add_task(description, total=total, item="")

    def advance(self, item: str) -> None:
        if self.task is not None:
            self.progress.update(self.task, advance=1, item=item)


@glue_app.command("extract", short_help="Write one region's Glue Data Catalog and jobs (scripts included) to OUT.")
def extract_command(
    region: Annotated[str, typer.Option(help="AWS region of the Glue catalog and jobs")],
    out: Annotated[Path, typer.Option(help="folder to write (created if missing)")],
    profile: Annotated[str | None, typer.Option(help="AWS profile (default: the usual credential chain)")] = None,
    jobs: Annotated[str, typer.Option(help="extract only jobs whose name matches this pattern, e.g. 'sales_*'")] = "*",
) -> None:
    """Write the Glue Data Catalog and the jobs (configuration, script, extra files) of one region to OUT."""
    try:
        session = boto3.Session(region_name=region, profile_name=profile)
    except ProfileNotFound as error:
        fail(str(error))
    retries = Config(retries={"mode": "standard", "max_attempts": 8})
    glue, s3 = session.client("glue", config=retries), session.client("s3", config=retries)
    try:
        # DynamoDB tables and streams are named by account: the caller's, as the jobs run in it.
        account: str | None = session.client("sts", config=retries).get_caller_identity()["Account"]
    except (BotoCoreError, ClientError):
        account = None
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    try:
        with Progress(*columns, TextColumn("{task.fields[item]}"), console=_err, transient=True) as progress:
            report = extract(
                glue, s3, out, region=region, account=account, jobs_pattern=jobs, progress=_RichProgress(progress)
            )
    except BotoCoreError as error:  # no credentials, no endpoint: nothing could be reached
        fail(f"cannot reach AWS: {error}")
    _out.print(
        f"extracted {report.databases} databases, {report.tables} tables, {report.connections} connections "
        f"and {len(report.jobs)} jobs to {out}",
        highlight=False,
    )
    for problem in report.errors:
        _err.print(Text.assemble(("error: ", "bold red"), str(problem)), soft_wrap=True)
    if report.errors:
        raise typer.Exit(1)


def _summary(results: list[JobResult]) -> Table:
    table = Table(title="Glue job lineage")
    for column in ("job", "inputs", "outputs", "column edges", "unresolved"):
        table.add_column(column, overflow="fold")
    for result in results:
        if result.event is None:
            table.add_row(result.name, "-", "-", "-", Text(f"not analysed: {result.error}", style="red"))
            continue
        inputs = "\n".join(
            f"{d.namespace}/{d.name}" if d.namespace.startswith("s3") else d.name for d in result.event.inputs or []
        )
        outputs = "\n".join(
            f"{d.namespace}/{d.name}" if d.namespace.startswith("s3") else d.name for d in result.event.outputs or []
        )
        edges = 0
        for output in result.event.outputs or []:
            facet = (output.facets or {}).get("columnLineage")
            for field in getattr(facet, "fields", {}).values():
                edges += sum(len(item.transformations or [None]) for item in field.inputFields)
        table.add_row(result.name, inputs, outputs, str(edges), str(len(result.unresolved)))
    return table


@glue_app.command("lineage")
def lineage_command(
    folder: Annotated[Path, typer.Argument(help="a folder written by 'lakeline glue extract' or by hand")],
    arguments: Annotated[
        Path | None, typer.Option(help='per-run job arguments: {"job name": {"--NAME": "value"}}')
    ] = None,
    jobs: Annotated[str, typer.Option(help="analyse only jobs whose name matches this pattern")] = "*",
    json_output: Annotated[bool, typer.Option("--json", help="print the events (JSON) instead of a summary")] = False,
    events_file: Annotated[
        Path | None, typer.Option(help="where to write the events (default: DIR/lineage/openlineage.jsonl)")
    ] = None,
    dataset_namespace: Annotated[
        str | None, typer.Option(help="namespace of catalog tables (default: config, else Athena's of the region)")
    ] = None,
    job_namespace: Annotated[str | None, typer.Option(help="namespace of the jobs (default: 'lakeline')")] = None,
) -> None:
    """Table- and column-level lineage of each job's script, as OpenLineage RunEvents."""
    try:
        settings = load_openlineage_settings(
            os.environ,
            cwd=Path.cwd(),
            home=Path.home(),
            overrides={"namespace": job_namespace, "datasetNamespace": dataset_namespace},
        )
        glue_folder = load_folder(folder)
        # The tables are those of the folder's Glue catalog: named as every command names a dump's tables.
        accounts = frozenset({glue_folder.account}) if glue_folder.account else glue_folder.catalog.catalog_ids
        naming = glue_dump_naming(
            settings.dataset_namespace,
            settings.glue_catalog,
            region=glue_folder.region,
            catalog_ids=accounts,
            namespace_given=dataset_namespace is not None,
        )
        run_arguments = load_run_arguments(arguments) if arguments else {}
        results = analyse_folder(
            glue_folder,
            settings=settings,
            naming=naming,
            run_arguments=run_arguments,
            jobs_pattern=jobs,
        )
        events = [event for result in results for event in result.events]
        path = events_file or default_events_path(glue_folder)
        logs.to_folder(folder / "lineage")  # the SQL parser's warnings on the scripts' statements, kept there
        emitter = store_events(events, path, settings)
    except ConfigError as error:
        fail(str(error))
    except LakelineError as error:
        fail(str(error), code=EXIT_FAILED)
    if json_output:
        sys.stdout.write(json.dumps([event_to_dict(event) for event in events], indent=2) + "\n")
    else:
        _out.print(_summary(results))
        for result in results:
            if result.analysis is not None and result.analysis.python2:
                _out.print(f"{result.name}: a Python 2 script, analysed after its Python 2 syntax was rewritten")
            for problem in result.unresolved:
                _out.print(Text.assemble((f"{result.name}: ", "yellow"), str(problem)), soft_wrap=True)
    sent = " and sent through the configured transport" if emitter.sends_events else ""
    _err.print(f"{len(events)} events written to {path}{sent}", highlight=False, soft_wrap=True)
    failed = [result for result in results if result.error]
    for result in failed:
        _err.print(Text.assemble(("error: ", "bold red"), f"{result.name}: {result.error}"), soft_wrap=True)
    if failed:
        raise typer.Exit(1)
