"""``lakeline demo``, ``run`` and ``watch``: the pipeline run locally, on sample data or over a
project's own folders (once, or as files land)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.markup import escape

from lakeline.cli.shared import ProjectOption, note_runtime, progress_console
from lakeline.console import EXIT_FAILED, counted, fail
from lakeline.engines.base import QueryError
from lakeline.errors import LakelineError

if TYPE_CHECKING:
    from rich.console import Console

    from lakeline.runtimes.deployed.run import DeployedRun
    from lakeline.runtimes.embedded.project import LocalProject


def demo(
    workspace: Annotated[Path, typer.Option(help="where the sample lake and the results go")] = Path(".lakeline-demo"),
    embedded: Annotated[
        bool,
        typer.Option(
            "--embedded",
            help="run the pipeline's code in-process on embedded PySpark (the runtime of `lakeline run`) instead "
            "of the synthesized stacks deployed on a local AWS endpoint",
        ),
    ] = False,
) -> None:
    """Run the pipeline on generated sample data, with no AWS account: by default the system users deploy
    (the CDK app synthesized and deployed on a local AWS endpoint, IAM enforced, Athena on embedded PySpark);
    one file of it breaks a quality check and is blocked, as the demo shows. Exits 1 if any other execution
    failed or anything else was parked, or if that file was not blocked."""
    if embedded:
        from lakeline.runtimes.embedded.demo import run_demo

        try:
            report = run_demo(workspace, progress_console()).report
        except LakelineError as error:
            fail(str(error))
        if report.failures or report.quarantined:
            fail(
                f"{counted(len(report.failures), 'run', 'runs')} failed and "
                f"{counted(len(report.quarantined), 'file was', 'files were')} quarantined (listed above)",
                code=EXIT_FAILED,
            )
        return
    from lakeline.runtimes.deployed.demo import run_deployed_demo
    from lakeline.runtimes.deployed.operator import operation_errors

    try:
        run = run_deployed_demo(workspace, progress_console())
    except operation_errors() as error:
        fail(str(error))
    fail_unless_clean(run)


DeployedOption = Annotated[
    bool,
    typer.Option(
        "--deployed/--embedded",
        help="--deployed: the system users deploy, the CDK app synthesized and deployed on a local AWS endpoint "
        "(IAM enforced, state machines on an ASL interpreter, Athena on embedded PySpark) for this command, with "
        "the state the last one kept in <workspace>/deployed/state; needs a clone of the repository, Node and its "
        "packages (`npm ci`, as `make demo` runs it). --embedded: the pipeline's code in-process on embedded "
        "PySpark (faster; Python and Java only)",
    ),
]


def fail_unless_clean(run: DeployedRun) -> None:
    """Exit 1 unless ``run`` was clean, with what went wrong: the counts, and each table it could not make."""
    if not run.clean:
        fail(
            f"{counted(len(run.failed), 'execution', 'executions')} failed, "
            f"{counted(sum(map(len, run.parked.values())), 'message was', 'messages were')} parked and "
            f"{counted(len(run.quarantined), 'file was', 'files were')} quarantined "
            "(listed above, and in summary.json)",
            code=EXIT_FAILED,
            problems=run.refused_tables,
        )


def _run_deployed(
    config: Path, *, watching: bool = False, full: bool = False, poll: float = 2.0, duration: float | None = None
) -> None:
    """``run`` and ``watch`` on the local deployment: exits 1 if an execution failed or anything was parked."""
    import time

    from lakeline.project.config import ProjectConfig
    from lakeline.runtimes.deployed.local_aws.system import check_app
    from lakeline.runtimes.deployed.operator import operation_errors
    from lakeline.runtimes.deployed.run import DeployedProject
    from lakeline.runtimes.embedded.project import watch

    console = progress_console()
    try:
        started = time.monotonic()
        check_app()
        project = DeployedProject(ProjectConfig.load(config), console)
        _refuse_if_up(project.workspace.root)
        note_runtime(project.workspace.root, deployed=True, config=config)
        keys = [] if watching else project.raw_keys()
        seen = project.snapshot(keys)
        if not watching and not full and project.nothing_new(seen):
            console.print(
                f"nothing new since the last run: {len(keys)} raw files, all uploaded, and the project unchanged "
                f"(checked in {time.monotonic() - started:.1f}s). Results: {project.workspace.root / 'deployed'}"
                "/summary.json. --full uploads every file to the deployment again.",
                soft_wrap=True,
            )
            return
        with project:
            project.prepare()
            if watching:
                try:
                    watch(project, poll_seconds=poll, max_seconds=duration)
                except KeyboardInterrupt:
                    console.print("stopped")
            else:
                project.process(keys, again=full)
            run = project.finish(started)
            if not watching:
                project.settle(seen, run)
    except operation_errors() as error:
        fail(str(error))
    fail_unless_clean(run)


def run_project(
    config: ProjectOption = Path("lakeline.yml"),
    full: Annotated[
        bool, typer.Option("--full", help="send every raw file through the pipeline, even if nothing changed")
    ] = False,
    deployed: DeployedOption = True,
) -> None:
    """Run the pipeline locally over a project's own folders: every raw file new or changed since the last
    run is uploaded to the project's deployment of the synthesized stacks, stood up on this machine for this
    command with what the last one kept (--embedded: every file arrives at the pipeline's code run in-process).
    When nothing changed since the last clean run (no new or changed raw file, the same settings, items,
    DDL, queries and stacks), it says so without standing anything up. Exits 1 if anything failed or was
    parked or quarantined."""
    if deployed:
        _run_deployed(config, full=full)
        return
    import time

    from lakeline.project.unresolved import unresolved_file

    console = progress_console()
    try:
        started = time.monotonic()
        project = _embedded_project(config, console)
        note_runtime(project.workspace.root, deployed=False, config=config)
        keys = project.raw_keys()
        seen = project.snapshot(keys)
        if not full and project.nothing_new(seen):
            root = project.workspace.root
            console.print(
                f"nothing new since the last run: {len(keys)} raw files, all loaded, and the project unchanged "
                f"(checked in {time.monotonic() - started:.1f}s). Results: {root / 'summary.json'}, "
                f"lineage picture: {root / 'lineage.html'}. --full sends every file through the pipeline again.",
                soft_wrap=True,
            )
            return
        with project:
            project.prepare()
            project.process(keys, seen.files)  # the snapshot read every file already
            run = project.finish(started)
            earlier = project.conclude(seen, run.report)
    except (LakelineError, QueryError, OSError) as error:
        _stopped(error, config)
    for failure in earlier:
        console.print(f"[red]still failed (an earlier run)[/] {escape(failure)}", soft_wrap=True)
    if earlier:
        console.print(
            "re-send the files of a failed target, or rebuild it with `lakeline stage-b run`; "
            f"{unresolved_file(project.workspace.root)} lists what is open (delete it to dismiss)",
            soft_wrap=True,
        )
    report = run.report
    if report.failures or report.quarantined or earlier:
        fail(
            f"{counted(len(report.failures), 'run', 'runs')} failed and "
            f"{counted(len(report.quarantined), 'file was', 'files were')} quarantined "
            "(listed above, and in summary.json)"
            + (f"; {len(earlier)} failures of earlier runs remain" if earlier else ""),
            code=EXIT_FAILED,
            problems=report.refused_tables,
        )


def watch_project(
    config: ProjectOption = Path("lakeline.yml"),
    poll: Annotated[float, typer.Option(help="seconds between looks at the raw folder")] = 2.0,
    duration: Annotated[float | None, typer.Option(help="stop after this many seconds")] = None,
    deployed: DeployedOption = True,
) -> None:
    """Process files as they land in the project's raw folder, until Ctrl-C (or --duration): each is uploaded
    to the project's deployment of the synthesized stacks, stood up while it watches (--embedded: each
    arrives at the pipeline's code run in-process)."""
    if deployed:
        _run_deployed(config, watching=True, poll=poll, duration=duration)
        return
    import time

    from lakeline.runtimes.embedded.project import watch

    console = progress_console()
    try:
        started = time.monotonic()
        project = _embedded_project(config, console)
        with project:
            note_runtime(project.workspace.root, deployed=False, config=config)
            project.prepare()
            try:
                watch(project, poll_seconds=poll, max_seconds=duration)
            except KeyboardInterrupt:
                console.print("stopped")
            project.finish(started)
    except (LakelineError, QueryError, OSError) as error:
        _stopped(error, config)


def _embedded_project(config: Path, console: Console) -> LocalProject:
    """The project of ``config`` on the embedded runtime, for ``run`` and ``watch --embedded`` (refused while ``lakeline
    up`` keeps its workspace's deployment running: ``_refuse_if_up``)."""
    from lakeline.project.config import ProjectConfig
    from lakeline.runtimes.embedded.project import LocalProject

    project = LocalProject(ProjectConfig.load(config), console)
    _refuse_if_up(project.workspace.root)
    return project


def _refuse_if_up(root: Path) -> None:
    """``run`` and ``watch`` stand a deployment (or Spark) up of their own and keep its state: while a ``lakeline
    up`` keeps the workspace's deployment running, its files go in through its endpoint instead (its state is
    kept by it, when it stops)."""
    from lakeline.runtimes.deployed.endpoint import refuse_if_up

    refuse_if_up(root, instead="put files into its raw bucket through the endpoint (`aws s3 cp`, `aws s3 sync`)")


def _stopped(error: LakelineError | QueryError | OSError, config: Path) -> NoReturn:
    """Exit with one ``error:`` line for an error that stopped ``run`` or ``watch --embedded``: a full disk
    wherever it struck (``lakeline.runtimes.embedded.full_disk``; exit 2, as for a workspace the command cannot run on),
    the error's own words otherwise (exit 1 for a query that failed, else 2). Any other ``OSError`` is a
    fault of Lakeline's, raised as it is."""
    from lakeline.runtimes.embedded.full_disk import full_disk

    full = full_disk(error, config.resolve().parent)
    if full is not None:
        fail(str(full))
    if isinstance(error, OSError):
        raise error
    fail(str(error), code=1 if isinstance(error, QueryError) else 2)
