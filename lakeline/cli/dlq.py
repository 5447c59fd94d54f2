"""``lakeline dlq list | show | redrive``: what waits in the dead-letter queues (deployed) or the
quarantine (a workspace), and why; parked messages sent back once fixed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from lakeline.cli.shared import (
    ConfigOption,
    RuntimeOption,
    StackOption,
    WorkspaceOption,
    existing_workspace,
    print_json,
    project_file,
    reads_deployment,
)
from lakeline.console import fail
from lakeline.errors import LakelineError

if TYPE_CHECKING:
    from lakeline.project.quarantine import Quarantine
    from lakeline.runtimes.deployed.local_aws.kept_state import KeptMessage

dlq_app = typer.Typer(help="What waits in the dead-letter queues, and why; send it back once fixed.")
DLQ_QUEUES = {  # --queue: (its DLQ's stack output, the queue a redrive sends to)
    "stage-a": ("stage_a_dlq", "stage_a_queue"),
    "stage-b": ("stage_b_dlq", "stage_b_queue"),
    "lineage": ("lineage_dlq", None),
    "dependencies-stream": ("dependencies_stream_dlq", None),
}
# A refused dependency item's record, sent back as it is, would be refused again: the item itself is what to fix.
STREAM_FIX = (
    "dependencies-stream: put a corrected item under the key named (`lakeline deps put`, or `aws dynamodb put-item`); "
    "there is nothing to send back; an item refused for closing a cycle since broken elsewhere is applied by "
    "`lakeline deps backfill`"
)


@dlq_app.command("list", short_help="Each parked message or quarantined file, with its reason.")
def dlq_list(
    stack: StackOption = None,
    queue: Annotated[list[str] | None, typer.Option(help=f"one of {', '.join(DLQ_QUEUES)} [default: all]")] = None,
    config: ConfigOption = None,
    workspace: WorkspaceOption = None,
    deployed: RuntimeOption = None,
) -> None:
    """Each parked message with the reason it was parked (deployed), or each quarantined file with its
    reason (a workspace). Nothing is taken off a queue. Exits 1 if anything is parked."""
    from botocore.exceptions import BotoCoreError, ClientError

    console = Console(soft_wrap=True)
    try:
        if deployed is not None and stack is not None:
            raise LakelineError("--deployed/--embedded (a local project) and --stack (one in AWS): say one")
        if stack is not None:
            from lakeline.aws.clients import AwsClients

            aws = AwsClients()
            parked = _list_stack_dead_letters(console, aws.cloudformation, aws.sqs, stack, _dead_letter_queues(queue))
        else:
            from lakeline.project.quarantine import Quarantine

            root, _ = existing_workspace(config, workspace)
            if reads_deployment(deployed, root):
                from lakeline.runtimes.deployed.endpoint import reachable

                up = reachable(root)  # a running `lakeline up`'s queues hold what was parked since it started
                if up is None:
                    parked = _list_kept_dead_letters(console, root, _dead_letter_queues(queue))
                else:
                    console.print(f"the local deployment kept up by `lakeline up` at {up.url} (pid {up.pid})")
                    stack_name, queues = up.resources["pipeline_stack"], _dead_letter_queues(queue)
                    parked = _list_stack_dead_letters(
                        console, up.client("cloudformation"), up.client("sqs"), stack_name, queues
                    )
                if queue is None or "stage-a" in queue:  # files of a table no run could make: never uploaded
                    parked += _list_quarantine(console, Quarantine.of_deployment(root), only_parked=True)
            else:
                parked = _list_quarantine(console, Quarantine.of(root))
    except (LakelineError, OSError, ValueError) as error:
        fail(str(error))
    except (ClientError, BotoCoreError) as error:
        what = f"stack {stack}" if stack is not None else "the deployment `lakeline up` keeps up"
        fail(f"cannot read {what}: {error}")
    if parked:
        raise typer.Exit(1)


def _list_quarantine(console: Console, quarantine: Quarantine, *, only_parked: bool = False) -> int:
    """Each quarantined file with its reason, and how many (``only_parked``: nothing if none)."""
    quarantined = quarantine.parked()
    if only_parked and not quarantined:
        return 0
    for key, reason in quarantined:
        console.print(f"quarantine  {escape(key)}  {escape(reason)}")
    console.print(f"{len(quarantined)} quarantined; fix a file and run again to load it")
    return len(quarantined)


def _dead_letter_queues(named: list[str] | None) -> list[str]:
    """The ``--queue`` names given (every dead-letter queue if none), each checked."""
    unknown = [name for name in named or [] if name not in DLQ_QUEUES]
    if unknown:
        raise LakelineError(f"--queue {', '.join(unknown)}: not one of {', '.join(DLQ_QUEUES)}")
    return named or list(DLQ_QUEUES)


def kept_dead_letters(root: Path) -> dict[str, list[KeptMessage]]:
    """Each DLQ (by ``--queue`` name) → the messages the workspace's kept local deployment holds in it."""
    from lakeline.operations.status import STACK_OUTPUTS, kept_pipeline

    pipeline, messages = kept_pipeline(root)
    return {name: messages.get(pipeline[STACK_OUTPUTS[dlq]], []) for name, (dlq, _) in DLQ_QUEUES.items()}


def _list_kept_dead_letters(console: Console, root: Path, queues: list[str]) -> int:
    """The parked messages the local deployment's last run kept
    (``lakeline.runtimes.deployed.local_aws.kept_state``)."""
    from lakeline.operations.dead_letters import parked_reason

    kept = kept_dead_letters(root)
    parked = 0
    for name in queues:
        letters = kept[name]
        parked += len(letters)
        console.print(f"[bold]{name}[/]: {len(letters)} parked")
        for letter in letters:
            console.print(f"  {escape(parked_reason(letter.attributes, letter.body))}")
            console.print(f"    {escape(_subject(name, letter.body))}", style="dim")
    if any(kept[name] for name in queues if DLQ_QUEUES[name][1] is not None):
        console.print("fix the cause, then `lakeline dlq redrive --queue <queue>` sends them back")
    _print_stream_fix(console, {name: len(kept[name]) for name in queues})
    return parked


def _subject(queue: str, body: str) -> str:
    """What a parked message is about: a stage's (a queue a redrive sends back to) raw file or target partition;
    another queue's body begins (``dlq show`` prints it whole)."""
    from stage_end.waiting import queued_subject

    return queued_subject(body) if DLQ_QUEUES[queue][1] is not None else body[:200]


def _print_stream_fix(console: Console, parked: dict[str, int]) -> None:
    if parked.get("dependencies-stream"):
        console.print(STREAM_FIX)


def _list_stack_dead_letters(console: Console, cloudformation: Any, sqs: Any, stack: str, queues: list[str]) -> int:
    from lakeline.operations.dead_letters import read_dead_letters
    from lakeline.operations.status import stack_outputs

    outputs, counts = stack_outputs(cloudformation, stack), {}
    for name in queues:
        letters = read_dead_letters(sqs, outputs[DLQ_QUEUES[name][0]])
        counts[name] = len(letters)
        console.print(f"[bold]{name}[/]: {len(letters)} parked")
        for letter in letters:
            console.print(f"  {letter.message_id}  {escape(letter.reason)}")
            console.print(f"    {escape(_subject(name, letter.body))}", style="dim")
    _print_stream_fix(console, counts)
    return sum(counts.values())


@dlq_app.command("show", short_help="One parked message or quarantined file, whole.")
def dlq_show(
    message: Annotated[str, typer.Argument(help="a message id (as `dlq list` prints it), or a quarantined file's key")],
    stack: StackOption = None,
    queue: Annotated[list[str] | None, typer.Option(help=f"one of {', '.join(DLQ_QUEUES)} [default: all]")] = None,
    config: ConfigOption = None,
    workspace: WorkspaceOption = None,
) -> None:
    """One parked message whole: its queue, reason, the function that parked it and its body (JSON
    indented); or a quarantined file's reason and where the file is. Nothing is taken off a queue."""
    from botocore.exceptions import BotoCoreError, ClientError

    from lakeline.aws.clients import AwsClients
    from lakeline.operations.dead_letters import read_dead_letters
    from lakeline.operations.status import stack_outputs

    aws = AwsClients()

    console = Console(soft_wrap=True)
    try:
        if stack is None:
            from lakeline.project.quarantine import Quarantine

            root, _ = existing_workspace(config, workspace)
            parked = Quarantine.of(root).parked_record(message) or Quarantine.of_deployment(root).parked_record(message)
            if parked is None:
                raise LakelineError(f"no quarantined file {message!r} in {root} (`lakeline dlq list` names them)")
            console.print(f"quarantined {escape(message)} at {parked.get('at', '?')}")
            console.print(f"reason: {escape(parked.get('reason', ''))}")
            return
        queues = _dead_letter_queues(queue)
        outputs, sqs = stack_outputs(aws.cloudformation, stack), aws.sqs
        for name in queues:
            for letter in read_dead_letters(sqs, outputs[DLQ_QUEUES[name][0]]):
                if letter.message_id == message:
                    console.print(f"[bold]{name}[/] {letter.message_id}")
                    console.print(f"reason: {escape(letter.reason)}")
                    console.print(f"parked by: {escape(letter.source or '(not recorded)')}")
                    if letter.json_body:
                        print_json(json.loads(letter.body))
                    else:
                        console.print(escape(letter.body))
                    return
        raise LakelineError(f"no parked message {message} in {', '.join(queues)}")
    except (LakelineError, OSError) as error:
        fail(str(error))
    except (ClientError, BotoCoreError) as error:
        fail(f"cannot read stack {stack}: {error}")


@dlq_app.command("redrive", short_help="Send a stage's parked messages back to its queue, once fixed.")
def dlq_redrive(
    queue: Annotated[str, typer.Option(help="stage-a or stage-b")],
    stack: StackOption = None,
    config: ConfigOption = None,
    workspace: WorkspaceOption = None,
    deployed: Annotated[
        bool | None,
        typer.Option(
            "--deployed/--embedded",
            help="--deployed: the project's local deployment (what `lakeline run` stands up), stood up with what "
            "its last command kept, the messages sent back and run, its state kept again [default, without "
            "--stack]",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Send a stage's parked messages back to its queue, once their cause is fixed (a file re-uploaded
    fixed is a new arrival already; this is for a fixed table, grant or item). Targets parked because
    they could not be routed stay: fix the item and use `lakeline reprocess`."""
    from botocore.exceptions import BotoCoreError, ClientError

    dead_letters, target = DLQ_QUEUES.get(queue, ("", None))
    if queue == "dependencies-stream":
        fail(f"--queue must be stage-a or stage-b: {STREAM_FIX}")
    if target is None:
        fail(f"--queue must be stage-a or stage-b, not {queue!r}")
    if deployed is not None and stack is not None:
        fail("--deployed/--embedded (a local project) and --stack (one in AWS): say one")
    if deployed is False:
        fail("the embedded runtime parks nothing in a queue: fix the quarantined file and run again to load it")
    if stack is None:  # the project's local deployment
        try:
            project = project_file(config, workspace)
        except LakelineError as error:
            fail(str(error))
        _redrive_deployed(project, queue, dead_letters, target)
        return

    from lakeline.aws.clients import AwsClients
    from lakeline.operations.dead_letters import redrive
    from lakeline.operations.status import stack_outputs

    aws = AwsClients()

    try:
        outputs = stack_outputs(aws.cloudformation, stack)
        sent, kept = redrive(aws.sqs, outputs[dead_letters], outputs[target])
    except LakelineError as error:
        fail(str(error))
    except (ClientError, BotoCoreError) as error:
        fail(f"cannot read stack {stack}: {error}")
    console = Console(soft_wrap=True)
    console.print(f"{queue}: {sent} messages sent back to the queue")
    for letter in kept:
        console.print(f"[yellow]kept[/] {letter.message_id}: {escape(letter.reason)} (fix the item, then reprocess)")


def _redrive_deployed(config: Path, queue: str, dead_letters: str, target: str) -> None:
    """``dlq redrive --deployed``: exits 1 if anything failed or was parked again."""
    import time

    from lakeline.cli.run import fail_unless_clean
    from lakeline.cli.shared import progress_console
    from lakeline.project.config import ProjectConfig
    from lakeline.runtimes.deployed.operator import operation_errors
    from lakeline.runtimes.deployed.run import DeployedProject

    console = progress_console()
    started = time.monotonic()
    try:
        project = DeployedProject(ProjectConfig.load(config), console)
        if not kept_dead_letters(project.workspace.root)[queue]:
            console.print(f"{queue}: nothing is parked in the local deployment; nothing to send back")
            return
        with project:
            project.prepare()
            _sent, kept = project.redrive(dead_letters, target)
            run = project.finish(started)
    except operation_errors() as error:
        fail(str(error))
    if kept:
        console.print(f"[yellow]kept[/] {kept} messages naming a target no item routes: fix the item, then reprocess")
    fail_unless_clean(run)
