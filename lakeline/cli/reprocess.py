"""``lakeline reprocess``: rebuild what a range of a table's partitions feeds, locally or on a
deployed stack."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from lakeline.cli.shared import (
    ConfigOption,
    RuntimeOption,
    WorkspaceOption,
    progress_console,
    project_file,
    project_of,
    reads_deployment,
    workspace_of,
)
from lakeline.console import fail
from lakeline.engines.base import QueryError
from lakeline.errors import LakelineError

if TYPE_CHECKING:
    from rich.console import Console

    from lakeline.operations.reprocess import Reprocessing
    from lakeline.runtimes.deployed.run import DeployedProject


def reprocess_command(
    table: Annotated[str, typer.Option(help="the table whose partitions feed what is rebuilt, database.table")],
    first: Annotated[str, typer.Option("--from", help="first partition value (inclusive), e.g. 2024-03-01")],
    last: Annotated[str, typer.Option("--to", help="last partition value (inclusive)")],
    targets: Annotated[
        list[str] | None, typer.Option("--target", help="rebuild only this target, database.table (repeatable)")
    ] = None,
    config: ConfigOption = None,
    workspace: WorkspaceOption = None,
    stack: Annotated[str | None, typer.Option(help="a deployed pipeline stack: send to its queue B")] = None,
    deployed: RuntimeOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="list what would be rebuilt; send nothing")] = False,
    raw: Annotated[
        bool,
        typer.Option(
            "--raw",
            help="send the raw files loaded into the stage table's partitions through stage A again (rebuilt "
            "with its settings as they are now; what they feed follows)",
        ),
    ] = False,
) -> None:
    """Rebuild what a range of a table's partitions feeds (backfills, a fixed target, a changed query):
    each partition is routed again as when it was finished, and its targets and their chains run again
    (an append target's run replaces the rows that partition appended before). With --raw, a stage
    table's partitions are rebuilt from their raw files first. On a deployment (--stack in AWS, or the
    project's local deployment) it sends them to queue B (--raw: re-sends the raw objects), locally waiting
    for what that sets going; on the embedded runtime it runs them."""
    import time

    from botocore.exceptions import BotoCoreError, ClientError

    from lakeline.dependencies.arrivals import ArrivalTracker
    from lakeline.dependencies.model import normalise_table_name
    from lakeline.operations.reprocess import (
        raw_to_resend,
        reprocess,
        reprocess_run,
        scan_commit_items,
        scan_table_partitions,
    )
    from lakeline.storage import LocalObjectStore

    console = progress_console()
    started = time.monotonic()
    try:
        table = normalise_table_name(table, "--table")
        wanted = {normalise_table_name(target, "--target") for target in targets or []}
        if raw and wanted:
            raise LakelineError("--raw rebuilds the stage partitions and everything they feed: give no --target")
        if stack is not None and deployed is not None:
            raise LakelineError("--deployed/--embedded (a local project) and --stack (one in AWS): say one")
        if stack is not None:
            done = _reprocess_stack(stack, Asked(table, first, last, wanted, dry_run, raw))
            failed = False
        elif reads_deployment(deployed, workspace_of(project_of(project_file(config, workspace)), None).root):
            done, failed = _reprocess_local_deployment(
                project_file(config, workspace), console, started, Asked(table, first, last, wanted, dry_run, raw)
            )
        else:
            from lakeline.project.config import ProjectConfig
            from lakeline.runtimes.embedded.project import LocalProject

            with LocalProject(ProjectConfig.load(project_file(config, workspace)), console) as project:
                project.prepare()
                flow, cloud = project.started_flow, project.started_cloud
                state = cloud.names.pipeline_state
                if raw:
                    done = raw_to_resend(
                        table, scan_commit_items(cloud.dynamodb, state, table), first, last, LocalObjectStore()
                    )
                    there = [key for key in done.raw_files if (project.workspace.raw_dir / key).is_file()]
                    done.skipped += [
                        f"{key}: gone from the raw folder since it was loaded"
                        for key in done.raw_files
                        if key not in there
                    ]
                    done.raw_files = there
                    if not dry_run:
                        report = project.resend(there, reprocess_run())
                else:
                    done = reprocess(
                        table,
                        scan_table_partitions(cloud.dynamodb, state, table, first, last),
                        flow.store,
                        ArrivalTracker(cloud.dynamodb, state),
                        cloud.sqs,
                        cloud.queue_urls["queue-b"],
                        targets=wanted,
                        dry_run=dry_run,
                    )
                    if not dry_run:
                        report = project.process([])
                if not dry_run:
                    project.finish(started)
                    project.carry_failures(report)
                    failed = bool(report.failures)
                else:
                    failed = False
    except (LakelineError, QueryError) as error:
        fail(str(error))
    except (ClientError, BotoCoreError) as error:
        fail(f"cannot read {f'stack {stack}' if stack else 'the local deployment'}: {error}")
    if raw:
        verb = "would send" if dry_run else "sent"
        console.print(
            f"{table}: {len(done.partitions)} partitions; {verb} {len(done.raw_files)} raw files through stage A again"
        )
        for key in done.raw_files:
            console.print(f"  {escape(key)}", soft_wrap=True)
        for line in done.skipped:
            console.print(f"[yellow]left out[/] {escape(line)}", soft_wrap=True)
        if failed or done.skipped:
            raise typer.Exit(1)
        return
    verb = "would rebuild" if dry_run else ("sent" if stack else "rebuilt")
    console.print(f"{table}: {len(done.partitions)} partitions routed again; {verb} {len(done.messages)} targets")
    for message in done.messages:
        console.print(f"  {escape(message.node)}", soft_wrap=True)
    for line in [*done.skipped, *done.unrouted]:
        console.print(f"[yellow]left out[/] {escape(line)}", soft_wrap=True)
    if failed or done.unrouted or done.skipped:
        raise typer.Exit(1)


@dataclass(frozen=True)
class Asked:
    """What ``reprocess`` is asked to rebuild, as its options say."""

    table: str
    first: str
    last: str
    targets: set[str]
    dry_run: bool
    raw: bool


def _reprocess_stack(stack: str, asked: Asked) -> Reprocessing:
    from lakeline.aws.clients import AwsClients
    from lakeline.operations.status import stack_outputs

    aws = AwsClients()
    outputs = stack_outputs(aws.cloudformation, stack)
    return _reprocess_deployment(outputs, aws.dynamodb, aws.s3, aws.sqs, f"stack {stack}", asked)


def _reprocess_local_deployment(
    config: Path, console: Console, started: float, asked: Asked
) -> tuple[Reprocessing, bool]:
    """As on a stack in AWS, on the project's local deployment stood up with what its last command kept; the
    work it sets going run, the state kept. Whether anything failed or was parked."""
    from lakeline.project.config import ProjectConfig
    from lakeline.runtimes.deployed.run import DeployedProject

    project = DeployedProject(ProjectConfig.load(config), console, keep_results=asked.dry_run)
    project.require_kept()
    with project:
        if asked.dry_run:
            return _deployment_reprocessing(project, asked), False
        project.prepare()
        with project.acting():
            done = _deployment_reprocessing(project, asked)
        run = project.finish(started)
    return done, not run.clean


def _deployment_reprocessing(project: DeployedProject, asked: Asked) -> Reprocessing:
    client, outputs = project.operator.deployment.client, project.operator.named_outputs
    return _reprocess_deployment(
        outputs, client("dynamodb"), client("s3"), client("sqs"), "the local deployment", asked
    )


def _reprocess_deployment(
    outputs: dict[str, str], dynamodb: Any, s3: Any, sqs: Any, where: str, asked: Asked
) -> Reprocessing:
    """What a deployment with these stack ``outputs`` is sent (read through these clients)."""
    from lakeline.dependencies.arrivals import ArrivalTracker
    from lakeline.dependencies.store import DependencyStore
    from lakeline.operations.reprocess import (
        raw_to_resend,
        reprocess,
        reprocess_run,
        resend_raw_files,
        scan_commit_items,
        scan_table_partitions,
    )
    from lakeline.storage import SchemeObjectStore

    table, first, last, dry_run = asked.table, asked.first, asked.last, asked.dry_run
    state = outputs["pipeline_state"]
    store = DependencyStore(dynamodb, outputs["dependencies"], outputs["dependencies_by_table"])
    if asked.raw:
        lists = SchemeObjectStore(s3)
        done = raw_to_resend(table, scan_commit_items(dynamodb, state, table), first, last, lists)
        if "raw_bucket" not in outputs:
            raise LakelineError(f"{where} has no output RawBucket: deploy this version of Lakeline for --raw")
        if not dry_run:
            sent = resend_raw_files(s3, outputs["raw_bucket"], done.raw_files, reprocess_run(), done.skipped)
            done.raw_files = sent
        return done
    return reprocess(
        table,
        scan_table_partitions(dynamodb, state, table, first, last),
        store,
        ArrivalTracker(dynamodb, state),
        sqs,
        outputs["stage_b_queue"],
        targets=asked.targets,
        dry_run=dry_run,
    )
