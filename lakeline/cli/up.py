"""``lakeline up``: the project's local deployment kept up as an AWS endpoint until Ctrl-C or ``lakeline down``,
for the AWS CLI, boto3 and pyathena (``lakeline.runtimes.deployed.endpoint``)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from lakeline.cli.shared import (
    ConfigOption,
    ProjectOption,
    WorkspaceOption,
    err_console,
    note_runtime,
    progress_console,
    project_of,
)
from lakeline.console import fail
from lakeline.errors import LakelineError

if TYPE_CHECKING:
    from lakeline.runtimes.deployed.endpoint import RunningEndpoint

AT_REST_SECONDS = 600.0
"""The longest a stop waits for the work under way to end before it keeps the state."""


def up(
    config: ProjectOption = Path("lakeline.yml"),
    workspace: WorkspaceOption = None,
    port: Annotated[
        int | None,
        typer.Option(
            help="the endpoint's port on 127.0.0.1 [default: a free one]", min=1, max=65535, show_default=False
        ),
    ] = None,
) -> None:
    """Stand the project's deployment up as `lakeline run` does (with the state the last command kept) and keep
    it running as a local AWS endpoint until Ctrl-C or `lakeline down`: it prints what to export for the AWS
    CLI, boto3 and pyathena, and the resources' names (also in <workspace>/deployed/endpoint.json while it
    runs). Objects put into the raw bucket go through the pipeline as in AWS; `lakeline status` and `lakeline
    sql` on the workspace reach it. Ctrl-C (or SIGTERM, or `lakeline down`) waits for the work under way, keeps
    the deployment's state as `lakeline run` does, and stops. Uploads nothing from the raw folder itself:
    `lakeline run` does, once this has stopped."""
    from lakeline.project.config import ProjectConfig
    from lakeline.project.settled import Settled
    from lakeline.runtimes.deployed import endpoint
    from lakeline.runtimes.deployed.local_aws.system import check_app, check_port
    from lakeline.runtimes.deployed.operator import operation_errors
    from lakeline.runtimes.deployed.run import DeployedProject

    console = progress_console()
    try:
        check_app()
        loaded = ProjectConfig.load(config)
        if workspace is not None:
            loaded = loaded.model_copy(update={"workspace": workspace.resolve()})
        endpoint.refuse_if_up(loaded.workspace)  # before a minute of stand-up; the workspace's claim is the guard
        if port is not None:
            check_port(port)  # said now rather than after the stand-up (the server checks it again as it starts)
        project = DeployedProject(loaded, console, port=port)
        root = project.workspace.root
        note_runtime(root, deployed=True, config=config)
        with project:
            # What arrives through the endpoint changes the deployment: `run` must not find "nothing new" meanwhile.
            Settled.forget(project.settled_file)
            project.prepare()
            project.prepare_sources()
            up_at = endpoint.describe(project.operator, os.getpid())
            # The handlers first: a `lakeline down` waiting for the endpoint signals as soon as it is published.
            with _signals() as stop:
                path = endpoint.publish(root, up_at)
                try:
                    _print_endpoint(console, up_at, path)
                    while not stop.wait(1.0):  # the handler runs on the main thread between two waits
                        pass
                    with console.status("stopping: waiting for the work under way to end (Ctrl-C again: keep nothing)"):
                        project.system.executions.wait(timeout=AT_REST_SECONDS)
                    project.keep()
                    # What `lakeline lineage show` and the picture read, as after `run` (no trace: the schedule
                    # function traces when invoked, as in AWS); after the state is kept, which it must not hold up.
                    errors: tuple[type[Exception], ...] = (*operation_errors(), OSError)
                    try:
                        picture = project.copy_lineage()
                        console.print(f"lineage picture: {escape(str(picture))}", soft_wrap=True)
                    except errors as error:
                        console.print(f"[yellow]the lineage was not copied into the workspace:[/] {escape(str(error))}")
                finally:
                    endpoint.withdraw(root)
    except operation_errors() as error:
        fail(str(error))
    except KeyboardInterrupt:
        # Keeping a deployment caught mid-work would lose the messages its executions hold: the next command
        # starts from the state the last one kept, as after a `run` that broke off.
        fail("stopped before the work under way ended: nothing of this `up` is kept", code=1)
    console.print(f"stopped; the deployment's state is kept in {escape(str(project.state_folder))}")


@contextmanager
def _signals() -> Iterator[threading.Event]:
    """An event set by the first SIGINT (Ctrl-C) or SIGTERM; a second one raises ``KeyboardInterrupt`` (stop at
    once). The endpoint's server, pollers and executions run in their own threads meanwhile."""
    stop = threading.Event()

    def stopping(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {number: signal.signal(number, stopping) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _print_endpoint(console: Console, up_at: RunningEndpoint, path: Path) -> None:
    console.print(f"the deployment is up at {up_at.url} (pid {up_at.pid}); in another terminal:", soft_wrap=True)
    for name, value in up_at.exports().items():
        console.print(f"export {name}={value}", highlight=False, soft_wrap=True)
    console.print("resources:")
    for name, value in up_at.resources.items():
        console.print(f"  {name}: {escape(value)}", highlight=False, soft_wrap=True)
    console.print(
        "(the AWS CLI v1 takes AWS_ENDPOINT_URL for every service but SQS: `aws sqs --endpoint-url "
        '"$AWS_ENDPOINT_URL" ...`)',
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        f"(also in {escape(str(path))}) Ctrl-C or `lakeline down` stops it and keeps its state", soft_wrap=True
    )


def down(config: ConfigOption = None, workspace: WorkspaceOption = None) -> None:
    """Stop the `lakeline up` that keeps the project's deployment up, as Ctrl-C in its terminal does: it waits
    for the work under way to end, keeps the deployment's state, and gives the workspace up; this waits for
    that (one still standing the deployment up is waited for, then stopped). Says so (exit 0) if none runs;
    exits 1 if it stopped without keeping its state, 2 if it has not stopped within the wait (its 10 minutes
    for the work under way, and two more)."""
    from lakeline.runtimes.deployed import endpoint
    from lakeline.runtimes.deployed.local_aws.kept_state import kept_at

    try:
        here = Path("lakeline.yml")  # what `up` reads by default
        project = project_of(config if config is not None or workspace is not None or not here.is_file() else here)
        root = (workspace or (project.workspace if project else Path(".lakeline"))).resolve()
        with err_console.status("stopping `lakeline up`: it waits for the work under way to end, then keeps the state"):
            stopped = endpoint.stop_up(
                root, lambda: kept_at(root / "deployed" / "state"), timeout=AT_REST_SECONDS + 120
            )
    except LakelineError as error:
        fail(str(error))
    if stopped is None:
        err_console.print(f"no `lakeline up` runs on the workspace {escape(str(root))}", soft_wrap=True)
        return
    if not stopped.kept:
        fail(f"`lakeline up` (pid {stopped.endpoint.pid}) stopped without keeping its state (see its output)", code=1)
    state = root / "deployed" / "state"
    err_console.print(
        f"stopped `lakeline up` (pid {stopped.endpoint.pid}); the deployment's state is kept in {escape(str(state))}",
        soft_wrap=True,
    )
