"""The project's local deployment kept up as an AWS endpoint (``lakeline up``): what a user exports to drive it
with the AWS CLI, boto3 or pyathena, and the file that tells other processes it runs.

``<workspace>/deployed/endpoint.json`` is written (whole) once the deployment is up and removed when it stops;
it names the process (``pid``). A file whose process is gone (a crash, a kill -9) is stale: it is ignored, and
the next ``up`` replaces it. Two ``up`` at once on one workspace are kept apart by the workspace's own claim
(``lakeline.project.engine_owner``, a ``flock`` the kernel releases); this file lets the second one name the
first, ``lakeline status`` and ``sql`` reach the running deployment through its endpoint, and ``lakeline down``
stop it (``stop_up``: a signal to the process that holds the workspace's claim, then the wait for that claim).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakeline.engines.jvm_archive import process_alive
from lakeline.errors import LakelineError
from lakeline.lineage.records.archive_table import DEFAULT_TABLE
from lakeline.project.engine_owner import current_owner, held_by_another
from lakeline.project.workspace import Workspace, write_json

if TYPE_CHECKING:
    from lakeline.runtimes.deployed.operator import Operator


class AlreadyUp(LakelineError):
    """The workspace's deployment is already kept up by another process."""


class NotAnswering(LakelineError):
    """The ``up`` named by the endpoint file runs, but its endpoint does not answer."""


QUEUE_RESOURCES = ("_queue", "_dlq", "_follow_ups")
"""The endings of the resources that are queues: printed as the endpoint's own queue URLs."""


@dataclass(frozen=True)
class RunningEndpoint:
    pid: int
    url: str
    region: str
    access_key_id: str
    secret_access_key: str
    resources: dict[str, str]
    """What a user names in their commands: buckets, tables, state machines, queues, the Athena workgroup."""

    def exports(self) -> dict[str, str]:
        """The environment the AWS CLI, boto3 and pyathena need to reach this endpoint as the operator
        (an IAM user allowed everything, the keys valid as long as this deployment runs)."""
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
        }

    def client(self, service: str) -> Any:
        """A boto3 client of ``service`` on this endpoint, signed as the operator."""
        from lakeline.aws.clients import client

        keys = {"aws_access_key_id": self.access_key_id, "aws_secret_access_key": self.secret_access_key}
        return client(service, region=self.region, endpoint_url=self.url, credentials=keys)

    def athena(self) -> Any:
        """A pyathena connection to this endpoint's Athena workgroup, as the operator."""
        import pyathena

        return pyathena.connect(
            work_group=self.resources["athena_workgroup"],
            region_name=self.region,
            endpoint_url=self.url,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            poll_interval=0.05,
        )


def endpoint_file(workspace_root: Path) -> Path:
    return workspace_root / "deployed" / "endpoint.json"


def describe(operator: Operator, pid: int) -> RunningEndpoint:
    """The running deployment of ``operator`` as its users see it."""
    deployment = operator.deployment
    if deployment.credentials is None:
        raise LakelineError("the deployment has no operator credentials (IAM is not enforced)")
    sqs = deployment.client("sqs")
    # The stack's outputs name queues by their URLs in AWS; the endpoint answers them by its own (the AWS CLI's
    # `sqs` commands and `get-queue-url` give and take those).
    outputs = {
        name: sqs.get_queue_url(QueueName=value.rsplit("/", 1)[-1])["QueueUrl"]
        if name.endswith(QUEUE_RESOURCES)
        else value
        for name, value in operator.named_outputs.items()
    }
    resources = {
        "pipeline_stack": operator.pipeline_stack,
        "raw_bucket": operator.buckets["raw"],
        "stage_bucket": operator.buckets["stage"],
        "analytics_bucket": operator.buckets["analytics"],
        "lineage_archive_bucket": operator.buckets["lineagearchive"],
        **outputs,
        "lineage_schedule_function": operator.function("LineageSchedule")[0],
        "athena_workgroup": operator.workgroup,
        "lineage_archive_table": f"{operator.lineage_database}.{DEFAULT_TABLE}",
    }
    return RunningEndpoint(
        pid=pid,
        url=deployment.endpoint,
        region=deployment.region,
        access_key_id=deployment.credentials.access_key_id,
        secret_access_key=deployment.credentials.secret_access_key,
        resources=resources,
    )


def running(workspace_root: Path) -> RunningEndpoint | None:
    """The endpoint kept up on this workspace by a live process; ``None`` if none is (no file, or a stale one)."""
    try:
        record: dict[str, Any] = json.loads(endpoint_file(workspace_root).read_text())
        found = RunningEndpoint(**record)
    except (OSError, ValueError, TypeError):
        return None
    return found if found.pid != os.getpid() and process_alive(found.pid) else None


def answers(url: str, timeout: float = 5.0) -> bool:
    """Whether an HTTP server answers at ``url`` (any answer: the endpoint refuses an unsigned request)."""
    host, _, port = url.removeprefix("http://").partition(":")
    connection = http.client.HTTPConnection(host, int(port or 80), timeout=timeout)
    try:
        connection.request("GET", "/")
        connection.getresponse().read()
    except OSError:
        return False
    finally:
        connection.close()
    return True


def reachable(workspace_root: Path) -> RunningEndpoint | None:
    """The endpoint of the ``up`` running on this workspace, which answers; ``None`` if no ``up`` runs."""
    found = running(workspace_root)
    if found is not None and not answers(found.url):
        raise NotAnswering(
            f"`lakeline up` (pid {found.pid}) keeps the deployment of {workspace_root} up, but its endpoint "
            f"{found.url} does not answer: stop it (`lakeline down`, or kill {found.pid}) and start it again"
        )
    return found


def refuse_if_up(workspace_root: Path, instead: str = "use it") -> None:
    """Fail, naming it, if another process keeps this workspace's deployment up (``instead``: what to do)."""
    other = running(workspace_root)
    if other is not None:
        raise AlreadyUp(
            f"the deployment of {workspace_root} is already up at {other.url} (`lakeline up`, pid {other.pid}): "
            f"{instead} (its exports are in {endpoint_file(workspace_root)}), or stop it with `lakeline down` first"
        )


@dataclass(frozen=True)
class Stopped:
    endpoint: RunningEndpoint
    kept: bool
    """Whether it kept the deployment's state as it stopped (not after a second signal, a crash or a kill)."""


class StillStopping(LakelineError):
    """A signalled ``up`` still holds the workspace after the wait."""


def stop_up(
    workspace_root: Path, kept_at: Callable[[], float | None], *, timeout: float, poll: float = 0.5
) -> Stopped | None:
    """Stop the ``up`` running on this workspace as Ctrl-C does (SIGTERM: it waits for the work under way and
    keeps the state) and wait until it has given the workspace up; ``None`` if none runs. ``kept_at``: when the
    deployment's state was last kept. Only the process that holds the workspace's claim is signalled (a pid
    that ended and was reused by another program is left alone). An ``up`` still standing the deployment up
    (it holds the workspace, its endpoint not yet published) is waited for, then stopped."""
    deadline = time.monotonic() + timeout
    found = running(workspace_root)
    while found is None and _standing_up(workspace_root):
        if time.monotonic() > deadline:
            raise StillStopping(
                f"`lakeline up` is still standing the deployment of {workspace_root} up after {timeout:.0f}s: run "
                "`lakeline down` again once it prints its endpoint"
            )
        time.sleep(poll)
        found = running(workspace_root)
    if found is None:
        return None
    owner = current_owner(Workspace(workspace_root))
    if owner is None or owner.pid != found.pid or not held_by_another(workspace_root):
        return None  # the file's process no longer holds the workspace: not an `up` to stop
    before = kept_at()
    if _first_to_ask_a_stop(workspace_root, found.pid):
        # One signal only: a second one stops `up` at once, keeping nothing (a `down` run again, or from
        # another terminal, waits for the stop already asked).
        os.kill(found.pid, signal.SIGTERM)
    while held_by_another(workspace_root):
        if time.monotonic() > deadline:
            raise StillStopping(
                f"`lakeline up` (pid {found.pid}) has not stopped within {timeout:.0f}s: it may still be waiting for "
                f"the work under way; run `lakeline down` again, or kill -TERM {found.pid} a second time to stop "
                "it at once (keeping nothing)"
            )
        time.sleep(poll)
    after = kept_at()
    return Stopped(found, kept=after is not None and after != before)


def _standing_up(workspace_root: Path) -> bool:
    """Whether a live ``lakeline up`` holds the workspace (its owner file names it): with no live endpoint
    published, it is still standing the deployment up."""
    owner = current_owner(Workspace(workspace_root))
    return (
        owner is not None
        and owner.command.endswith(" up")
        and process_alive(owner.pid)
        and held_by_another(workspace_root)
    )


def _stop_file(workspace_root: Path) -> Path:
    return endpoint_file(workspace_root).with_suffix(".stopping")


def _first_to_ask_a_stop(workspace_root: Path, pid: int) -> bool:
    """Claim the one stop signal of the ``up`` running as ``pid``: whether no ``down`` asked it to stop before
    (the file is made exclusively, so of two at once one is first)."""
    path = _stop_file(workspace_root)
    try:
        with path.open("x") as claim:
            claim.write(str(pid))
        return True
    except FileExistsError:
        try:
            asked = path.read_text().strip()
        except OSError:
            asked = ""
        if asked == str(pid):
            return False
        path.write_text(str(pid))  # left by an earlier `up`, which ended: this one was not asked yet
        return True


def publish(workspace_root: Path, endpoint: RunningEndpoint) -> Path:
    """Write ``endpoint.json`` whole (a reader never sees half of it)."""
    path = endpoint_file(workspace_root)
    write_json(path, asdict(endpoint))
    return path


def withdraw(workspace_root: Path) -> None:
    """Remove ``endpoint.json`` if this process wrote it (never another live ``up``'s)."""
    path = endpoint_file(workspace_root)
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if isinstance(record, dict) and record.get("pid") == os.getpid():
        path.unlink(missing_ok=True)
        _stop_file(workspace_root).unlink(missing_ok=True)
