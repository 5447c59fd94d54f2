"""``lakeline status``: what the pipeline holds, what waits and what failed, in a workspace or a
deployed stack."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from lakeline.cli.shared import ConfigOption, RuntimeOption, WorkspaceOption, existing_workspace, reads_deployment
from lakeline.console import fail
from lakeline.errors import LakelineError

if TYPE_CHECKING:
    from lakeline.operations.status import PipelineStatus


def status(
    config: ConfigOption = None,
    workspace: WorkspaceOption = None,
    stack: Annotated[
        str | None, typer.Option(help="a deployed pipeline stack (e.g. Lakeline-dev-Pipeline) instead of a workspace")
    ] = None,
    since_hours: Annotated[
        float, typer.Option(help="--stack, or a running `lakeline up`: failed executions of the last N hours")
    ] = 24.0,
    deployed: RuntimeOption = None,
    output: Annotated[str, typer.Option("--format", help="table or json")] = "table",
) -> None:
    """What the pipeline holds (partitions and their versions), what waits (arrivals behind a run,
    triggerMode all targets and the sources they lack) and what failed (with the cause, and the
    dead-letter queues or the quarantine). The local deployment is read as its last command kept it, or through
    the endpoint of a `lakeline up` running on the workspace. Exits 1 if anything failed or waits in a
    dead-letter queue."""
    from datetime import UTC, datetime, timedelta

    from botocore.exceptions import BotoCoreError, ClientError

    from lakeline.operations.status import (
        StackClients,
        deployed_status,
        kept_deployment_status,
        local_status,
        running_deployment_status,
    )

    now = datetime.now(UTC)
    try:
        if output not in ("table", "json"):
            raise LakelineError(f"--format must be table or json, not {output!r}")
        if stack is not None and deployed is not None:
            raise LakelineError("--deployed/--embedded (a local project) and --stack (one in AWS): say one")
        if stack is not None:
            from lakeline.aws.clients import AwsClients

            aws = AwsClients()
            clients = StackClients(aws.cloudformation, aws.dynamodb, aws.sqs, aws.stepfunctions, aws.s3)
            report: PipelineStatus = deployed_status(clients, stack, now, since=timedelta(hours=since_hours))
        else:
            root, sources = existing_workspace(config, workspace)
            if reads_deployment(deployed, root):
                from lakeline.runtimes.deployed.endpoint import reachable

                up = reachable(root)  # a running `lakeline up`'s deployment is newer than what was kept
                report = (
                    kept_deployment_status(root, now)
                    if up is None
                    else running_deployment_status(up, root, now, since=timedelta(hours=since_hours))
                )
            else:
                report = local_status(root, sources, now)
    except (LakelineError, OSError, ValueError) as error:
        fail(str(error))
    except (ClientError, BotoCoreError) as error:  # a stack that does not exist, no credentials, no region
        what = f"stack {stack}" if stack is not None else "the deployment `lakeline up` keeps up"
        fail(f"cannot read {what}: {error}")
    if output == "json":
        typer.echo(json.dumps(report.to_dict(), indent=1))
    else:
        _print_status(report)
    if report.failures or any(report.dead_letters.values()):
        raise typer.Exit(1)


def _print_status(report: PipelineStatus) -> None:
    from rich.table import Table

    from lakeline.console import print_whole

    console = Console(soft_wrap=True)
    last = f" — last run {escape(report.last_run)}" if report.last_run else ""
    console.print(f"[bold]{escape(report.where)}[/]{last}")
    if report.sql_server:
        console.print(f"SQL server: {escape(report.sql_server)}")
    partitions = Table(title="partitions")
    for column in ("table", "partition", "version", "files", "published (UTC)", "waiting", "run in flight", "checks"):
        justify = "right" if column in ("version", "files", "waiting") else "left"
        partitions.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for part in report.partitions:
        partitions.add_row(
            part.table,
            part.partition or "(unpartitioned)",
            str(part.version),
            str(part.files),
            part.published_at or "-",
            str(part.waiting),
            part.run_in_flight or "",
            part.quality or "",
        )
    print_whole(console, partitions)  # a pipe or a log gets whole rows, not values cut at 80 columns
    for target in report.waiting_targets:
        console.print(
            f"waiting {escape(target.target_partition)}: has {', '.join(target.arrived) or 'nothing'}; "
            f"lacks {', '.join(target.missing) or '(unknown: its item is not in the project)'}"
        )
    if report.runs_in_flight:
        counts = ", ".join(f"{stage} {count}" for stage, count in report.runs_in_flight.items())
        console.print(f"runs in flight: {counts} (executions started and not yet ended, each holding a run slot)")
    if report.delayed:
        counts = ", ".join(f"{stage} {count}" for stage, count in report.delayed.items())
        console.print(
            f"waiting out a delay in their queue: {counts} (sent back because their partition had as many "
            "records waiting as it may hold, or no run slot was free; delivered again after at most two minutes)"
        )
    shown = ", ".join(f"{name} {count}" for name, count in report.dead_letters.items())
    console.print(f"dead letters: {shown or 'none'}")
    for failure in report.failures:
        console.print(f"[red]{escape(failure)}[/]")
    if not report.failures:
        console.print("nothing failed")
