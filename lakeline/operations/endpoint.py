"""The project's local deployment kept up as an AWS endpoint (``lakeline up``): what a user exports to drive it
with the AWS CLI, boto3 or pyathena, and the file that tells other processes it runs.

``<workspace>/deployed/endpoint.json`` is written (whole) once the deployment is up and removed when it stops;
it names the process (``pid``). A file whose process is gone (a crash, a kill -9) is stale: it is ignored, and
the next ``up`` replaces it. Two ``up`` at once on one workspace are kept apart by the workspace's own claim
(``lakeline.local.engine_owner``, a ``flock`` the kernel releases); this file only lets the second one name the
first, and other commands and tests find the running endpoint.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakeline.engines.jvm_archive import process_alive
from lakeline.errors import LakelineError
from lakeline.lineage.records.archive_table import DEFAULT_TABLE
from lakeline.local.workspace import write_json

if TYPE_CHECKING:
    from lakeline.operations.deployed_run import Operator


class AlreadyUp(LakelineError):
    """The workspace's deployment is already kept up by another process."""


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


def endpoint_file(workspace_root: Path) -> Path:
    return workspace_root / "deployed" / "endpoint.json"


def describe(operator: Operator, pid: int) -> RunningEndpoint:
    """The running deployment of ``operator`` as its users see it."""
    deployment = operator.deployment
    if deployment.credentials is None:
        raise LakelineError("the deployment has no operator credentials (IAM is not enforced)")
    resources = {
        "raw_bucket": operator.buckets["raw"],
        "stage_bucket": operator.buckets["stage"],
        "analytics_bucket": operator.buckets["analytics"],
        "lineage_archive_bucket": operator.buckets["lineagearchive"],
        **operator.named_outputs,
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


def refuse_if_up(workspace_root: Path) -> None:
    """Fail, naming it, if another process keeps this workspace's deployment up."""
    other = running(workspace_root)
    if other is not None:
        raise AlreadyUp(
            f"the deployment of {workspace_root} is already up at {other.url} (`lakeline up`, pid {other.pid}): "
            f"use it (its exports are in {endpoint_file(workspace_root)}), or stop it with Ctrl-C (kill -INT "
            f"{other.pid}) first"
        )


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
