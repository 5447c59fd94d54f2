"""``lakeline status``: what the pipeline holds, what waits and what failed, read the same way from a
local workspace and from a deployed stack.

Both keep the same pipeline-state items (``lakeline.commits`` partition versions, trigger mode
``all``'s readiness, ``lakeline.dependencies.arrivals``); locally they are the workspace's
``state/pipeline-state.json``, deployed the stack's DynamoDB table. What failed is, locally, the last
run's summary and the quarantine folder; deployed, the dead-letter queues' depths and the state
machines' failed executions with their cause.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakeline.commits import COMMIT_PREFIX
from lakeline.commits.slots import SLOTS_PREFIX, STAGES
from lakeline.errors import InvalidInputError
from lakeline.project.quarantine import Quarantine
from lakeline.project.unresolved import load_unresolved
from lakeline.project.workspace import Workspace
from lakeline.storage import LocalObjectStore, ObjectMissing, ObjectStore, S3ObjectStore
from stage_end.quality import report_from_json, report_location

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_stepfunctions import SFNClient

    from lakeline.runtimes.deployed.endpoint import RunningEndpoint
    from lakeline.runtimes.deployed.local_aws.kept_state import KeptMessage

MAX_EXECUTION = timedelta(hours=6)  # the state machines' timeout (stacks/constructs/workflow.py)

# The pipeline stack's outputs that ``--stack`` reads (stacks/pipeline_stack.py writes them).
STACK_OUTPUTS = {
    "pipeline_state": "PipelineStateTable",
    "dependencies": "DependenciesTable",
    "dependencies_by_table": "DependenciesByTableTable",
    "stage_a_queue": "StageAQueueUrl",
    "stage_a_dlq": "StageADeadLetterQueueUrl",
    "stage_b_queue": "StageBQueueUrl",
    "stage_b_dlq": "StageBDeadLetterQueueUrl",
    "lineage_dlq": "LineageDeadLetterQueueUrl",
    "dependencies_stream_dlq": "DependenciesStreamDeadLetterQueueUrl",
    "stage_a_machine": "StageAStateMachineArn",
    "stage_b_machine": "StageBStateMachineArn",
}
# Read by one command only: a stack deployed before it has every other command still.
LATER_OUTPUTS = {
    "raw_bucket": "RawBucket",
    "stage_a_follow_ups": "StageAFollowUpQueueUrl",
    "stage_b_follow_ups": "StageBFollowUpQueueUrl",
}


@dataclass(frozen=True)
class PartitionStatus:
    table: str
    partition: str
    version: int
    files: int
    published_at: str | None
    waiting: int  # arrivals or messages recorded, for the run that holds the partition or the next one
    run_in_flight: str | None
    quality: str | None = None
    """The published version's checks (#41), e.g. ``3/3 passed``, from its run's report, or the last checked
    version's, named (``3/3 passed (version 2, the last checked)``); ``None``: none ever ran."""


@dataclass(frozen=True)
class TargetWaiting:
    """A ``triggerMode: all`` target partition whose sources have not all arrived."""

    target_partition: str
    arrived: tuple[str, ...]
    missing: tuple[str, ...]


@dataclass
class PipelineStatus:
    where: str
    partitions: list[PartitionStatus] = field(default_factory=list)
    waiting_targets: list[TargetWaiting] = field(default_factory=list)
    dead_letters: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    last_run: str | None = None
    sql_server: str | None = None  # local: the workspace's `lakeline sql` server, if one runs
    runs_in_flight: dict[str, int] = field(default_factory=dict)
    """Per stage, the run slots in use (``lakeline.commits.slots``): executions started and not yet ended."""
    delayed: dict[str, int] = field(default_factory=dict)
    """Deployed, per stage queue: records sent back to wait out a delay (their partition's waiting list was full,
    or no run slot was free); they are delivered again when it ends."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _text(item: Mapping[str, Any], name: str) -> str | None:
    value = item.get(name, {})
    return str(value["S"]) if "S" in value else None


def _number(item: Mapping[str, Any], name: str) -> float | None:
    value = item.get(name, {})
    return float(value["N"]) if "N" in value else None


def _strings(item: Mapping[str, Any], name: str) -> tuple[str, ...]:
    return tuple(sorted(item.get(name, {}).get("SS", [])))


def _delayed(sqs: SQSClient, queue_url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])
    return int(attributes["Attributes"].get("ApproximateNumberOfMessagesDelayed", 0))


def runs_in_flight(items: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The run slots in use per stage (``stage a``, ``stage b``), from their counter items."""
    counted = {
        (_text(item, "target_partition") or "").removeprefix(SLOTS_PREFIX): int(_number(item, "in_flight") or 0)
        for item in items
        if (_text(item, "target_partition") or "").startswith(SLOTS_PREFIX)
    }
    return {f"stage {stage}": counted.get(stage, 0) for stage in STAGES}


TextReader = Callable[[str], "str | None"]
"""An object's text by its location (``s3://`` or ``file://``); ``None`` if there is no such object."""


def store_reader(store: ObjectStore) -> TextReader:
    def read(location: str) -> str | None:
        try:
            return store.read_text(location)
        except ObjectMissing:
            return None

    return read


def quality_of(read: TextReader, published: str | None) -> str | None:
    """The checks the published version passed, as the quality step's report beside its run says
    (``stage_end.quality``); ``None`` if no check ran on it (a table without checks, a compaction). A blocked
    version is never published: its rules are in the parked input's reason, which ``failures`` shows."""
    if not published:
        return None
    try:
        location = report_location(published)
    except InvalidInputError:  # a version not written into a run prefix: no run checked it
        return None
    text = read(location)
    return None if text is None else report_from_json(text).summary


def _checks(item: Mapping[str, Any], read: TextReader | None) -> str | None:
    """The ``checks`` column of a partition: its published version's checks (their report beside the run), else
    the last checked version's as the item keeps them (a version published without checks, a compaction of a
    table without them then), said to be of that version: ``3/3 passed (version 2, the last checked)``."""
    found = quality_of(read, _text(item, "published")) if read is not None else None
    if found is not None:
        return found
    summary, version = _text(item, "checked"), _number(item, "checked_version")
    if summary is None or version is None:
        return None
    if int(version) == int(_number(item, "version") or 0):
        return summary  # its report is not readable here (no reader), the item says the same
    return f"{summary} (version {int(version)}, the last checked)"


def read_items(
    items: Iterable[Mapping[str, Any]],
    required: Callable[[str], frozenset[str]],
    now: datetime,
    read: TextReader | None = None,
) -> tuple[list[PartitionStatus], list[TargetWaiting]]:
    """Partitions and waiting ``all`` targets from pipeline-state items (DynamoDB's typed JSON).
    ``required(target_dataset)`` gives a target's sources (empty if its item is unknown); ``read``, the objects
    where each published version's quality report is (none read without it)."""
    partitions, waiting = [], []
    for item in items:
        key = _text(item, "target_partition") or ""
        if key.startswith(COMMIT_PREFIX):
            table, _, partition = key[len(COMMIT_PREFIX) :].partition("/")
            published = _number(item, "published_at")
            expires = _number(item, "lease_expires")
            leased = _text(item, "lease_owner") if expires is not None and expires > now.timestamp() else None
            partitions.append(
                PartitionStatus(
                    table,
                    partition,
                    int(_number(item, "version") or 0),
                    int(_number(item, "files") or 0),
                    f"{datetime.fromtimestamp(published, UTC):%Y-%m-%d %H:%M:%S}" if published else None,
                    len(item.get("pending", {}).get("SS", [])),
                    leased,
                    _checks(item, read),
                )
            )
        elif "arrived_sources" in item and "completed_by" not in item:
            arrived = _strings(item, "arrived_sources")
            missing = tuple(sorted(required(key.partition("/")[0]) - set(arrived)))
            waiting.append(TargetWaiting(key, arrived, missing))
    partitions.sort(key=lambda status: (status.table, status.partition))
    waiting.sort(key=lambda target: target.target_partition)
    return partitions, waiting


def _last_run(summary_file: Path) -> tuple[str, dict[str, Any]] | None:
    """When the last run finished (its summary file's time, ``YYYY-MM-DD HH:MM:SS UTC``) and its summary, if
    a run left one."""
    if not summary_file.exists():
        return None
    summary: dict[str, Any] = json.loads(summary_file.read_text())
    return f"{datetime.fromtimestamp(summary_file.stat().st_mtime, UTC):%Y-%m-%d %H:%M:%S} UTC", summary


def local_status(workspace: Path, required: Callable[[str], frozenset[str]], now: datetime) -> PipelineStatus:
    """The status of a local workspace: its saved pipeline state, its last run and its quarantine."""
    from lakeline.project.sql_server import server_pid

    status = PipelineStatus(where=str(workspace))
    pid = server_pid(Workspace(workspace))
    if pid is not None:
        status.sql_server = f"running as pid {pid} (`lakeline sql --stop` ends it, as does any command that runs"
        status.sql_server += " the pipeline here)"
    items = Workspace(workspace).read_pipeline_state()
    status.partitions, status.waiting_targets = read_items(items, required, now, store_reader(LocalObjectStore()))
    last_run = _last_run(workspace / "summary.json")
    if last_run is not None:
        finished, summary = last_run
        status.last_run = (
            f"{finished}: {summary.get('stage_a_runs', 0)} stage A and {summary.get('stage_b_runs', 0)} stage B "
            f"runs in {summary.get('seconds', 0)}s"
        )
        status.failures = [f"failed {failure}" for failure in summary.get("failures", [])]
    reported = set(status.failures)
    status.failures += [
        f"still failed (an earlier run) {failure}"
        for failure in load_unresolved(workspace)
        if f"failed {failure}" not in reported
    ]
    parked = Quarantine.of(workspace).parked()
    status.dead_letters["quarantine"] = len(parked)
    status.failures += [f"quarantined {key}: {reason}" for key, reason in parked]
    return status


def kept_pipeline(workspace: Path) -> tuple[dict[str, str], dict[str, list[KeptMessage]]]:
    """The kept local deployment's pipeline stack outputs (every ``STACK_OUTPUTS`` one) and the messages kept
    of each queue (by URL); a clear error if nothing is kept or it was kept by another version."""
    from lakeline.errors import LakelineError
    from lakeline.runtimes.deployed.local_aws.kept_state import kept_messages

    folder = workspace / "deployed" / "state"
    outputs, queues = kept_messages(folder)
    pipelines = [values for stack, values in outputs.items() if stack.endswith("-Pipeline")]
    if not pipelines:
        raise LakelineError(f"no local deployment is kept in {workspace / 'deployed'}: run `lakeline run`")
    missing = [name for name in STACK_OUTPUTS.values() if name not in pipelines[0]]
    if missing:
        raise LakelineError(
            f"the local deployment kept in {folder} has no output {', '.join(missing)} (kept by another version): "
            "run `lakeline run` again"
        )
    return pipelines[0], queues


STAGE_DLQS = ("stage_a_dlq", "stage_b_dlq")


def kept_deployment_status(workspace: Path, now: datetime) -> PipelineStatus:
    """The status of a project's local deployment as its last command kept it (``lakeline run``; read from
    ``deployed/state``, nothing stood up): its pipeline state, its dead-letter queues and its last run."""
    from lakeline.operations.dead_letters import parked_reason
    from lakeline.runtimes.deployed.local_aws import kept_state
    from stage_end.waiting import queued_subject

    folder = workspace / "deployed" / "state"
    tables = kept_state.kept_tables(folder)
    pipeline, queues = kept_pipeline(workspace)
    status = PipelineStatus(where=f"the local deployment kept in {folder}")
    edges = [
        (item["target_dataset"]["S"], item["source_table"]["S"])
        for item in tables.get(pipeline[STACK_OUTPUTS["dependencies_by_table"]], [])
        if "target_dataset" in item and "source_table" in item
    ]

    def required(target: str) -> frozenset[str]:
        return frozenset(source for dataset, source in edges if dataset == target)

    items = tables.get(pipeline[STACK_OUTPUTS["pipeline_state"]], [])
    kept_objects = kept_state.kept_object_reader(folder)
    status.partitions, status.waiting_targets = read_items(items, required, now, kept_objects)
    status.runs_in_flight = runs_in_flight(items)
    for name in ("stage_a_dlq", "stage_b_dlq", "lineage_dlq", "dependencies_stream_dlq"):
        messages = queues.get(pipeline[STACK_OUTPUTS[name]], [])
        status.dead_letters[name.removesuffix("_dlq").replace("_", " ")] = len(messages)
        # A stage's parked message is named by what it is about (the raw file, the target partition) first.
        status.failures += [
            f"parked in {name.removesuffix('_dlq').replace('_', ' ')}: "
            + (f"{queued_subject(message.body)}: " if name in STAGE_DLQS else "")
            + parked_reason(message.attributes, message.body)
            for message in messages
        ]
    _quarantined(status, workspace)
    last_run = _last_run(workspace / "deployed" / "summary.json")
    if last_run is not None:
        finished, summary = last_run
        status.last_run = (
            f"{finished}: {summary.get('uploads', 0)} files uploaded, {summary.get('stage_a_runs', 0)} stage A and "
            f"{summary.get('stage_b_runs', 0)} stage B executions in {summary.get('seconds', 0)}s"
        )
        status.failures += [
            f"failed {failed['execution']}: {failed.get('error') or ''} {(failed.get('cause') or '')[:300]}".strip()
            for failed in summary.get("failed_executions", [])
        ]
    return status


def _quarantined(status: PipelineStatus, workspace: Path) -> None:
    """The files of a table the runs could not make: never uploaded, so in no queue."""
    parked = Quarantine.of_deployment(workspace).parked()
    status.dead_letters["quarantine"] = len(parked)
    status.failures += [f"quarantined {key}: {reason}" for key, reason in parked]


def running_deployment_status(
    up: RunningEndpoint, workspace: Path, now: datetime, *, since: timedelta = timedelta(days=1)
) -> PipelineStatus:
    """The status of the local deployment a ``lakeline up`` keeps running, read through its endpoint as
    ``deployed_status`` reads a stack in AWS, with the workspace's quarantine."""
    clients = StackClients(*(up.client(name) for name in ("cloudformation", "dynamodb", "sqs", "stepfunctions", "s3")))
    status = deployed_status(clients, up.resources["pipeline_stack"], now, since=since)
    status.where = f"the local deployment kept up by `lakeline up` at {up.url} (pid {up.pid})"
    _quarantined(status, workspace)
    return status


@dataclass(frozen=True)
class StackClients:
    cloudformation: Any  # botocore's CloudFormation client (no type stubs installed)
    dynamodb: DynamoDBClient
    sqs: SQSClient
    sfn: SFNClient
    s3: S3Client | None = None  # where the published versions' quality reports are; ``None``: not read


def stack_outputs(cloudformation: Any, stack: str) -> dict[str, str]:
    """The outputs ``status`` needs, by their ``STACK_OUTPUTS`` name; a missing one is an error."""
    from lakeline.errors import LakelineError

    (described,) = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    outputs = {output["OutputKey"]: output["OutputValue"] for output in described.get("Outputs", [])}
    missing = [key for key in STACK_OUTPUTS.values() if key not in outputs]
    if missing:
        raise LakelineError(f"stack {stack} has no output {', '.join(missing)}: deploy this version of Lakeline")
    later = {name: outputs[key] for name, key in LATER_OUTPUTS.items() if key in outputs}
    return {**{name: outputs[key] for name, key in STACK_OUTPUTS.items()}, **later}


def deployed_status(
    clients: StackClients, stack: str, now: datetime, *, since: timedelta = timedelta(days=1)
) -> PipelineStatus:
    """The status of a deployed stack: its pipeline-state table, dead-letter queues and the state
    machines' executions that failed since ``now - since``, each with its cause in one line."""
    from lakeline.dependencies.store import DependencyStore

    outputs = stack_outputs(clients.cloudformation, stack)
    store = DependencyStore(clients.dynamodb, outputs["dependencies"], outputs["dependencies_by_table"])
    required = store.sources_of_target
    status = PipelineStatus(where=f"stack {stack}")
    items: list[Mapping[str, Any]] = []
    for scanned in clients.dynamodb.get_paginator("scan").paginate(TableName=outputs["pipeline_state"]):
        items.extend(scanned.get("Items", []))
    reports = store_reader(S3ObjectStore(clients.s3)) if clients.s3 is not None else None
    status.partitions, status.waiting_targets = read_items(items, required, now, reports)
    status.runs_in_flight = runs_in_flight(items)
    for stage in STAGES:
        # Both of the stage's queues: its follow-up runs wait for a free slot on their own (#39); a stack deployed
        # before has no follow-up queue.
        queues = [outputs[name] for name in (f"stage_{stage}_queue", f"stage_{stage}_follow_ups") if name in outputs]
        status.delayed[f"stage {stage}"] = sum(_delayed(clients.sqs, url) for url in queues)
    for name in ("stage_a_dlq", "stage_b_dlq", "lineage_dlq", "dependencies_stream_dlq"):
        attributes = clients.sqs.get_queue_attributes(
            QueueUrl=outputs[name], AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        status.dead_letters[name.removesuffix("_dlq").replace("_", " ")] = int(
            attributes.get("ApproximateNumberOfMessages", 0)
        )
    oldest_start = now - since - MAX_EXECUTION  # a run that ended within ``since`` started after this
    for stage, machine in (("stage A", outputs["stage_a_machine"]), ("stage B", outputs["stage_b_machine"])):
        for outcome in ("FAILED", "TIMED_OUT", "ABORTED"):
            runs = clients.sfn.get_paginator("list_executions").paginate(stateMachineArn=machine, statusFilter=outcome)
            for page in runs:
                for run in page["executions"]:
                    stopped = run.get("stopDate", now)
                    if stopped < now - since:
                        continue
                    described = clients.sfn.describe_execution(executionArn=run["executionArn"])
                    cause = described.get("cause") or described.get("error") or "no cause recorded"
                    status.failures.append(
                        f"{stage} {run['name']} {outcome.lower().replace('_', ' ')} at "
                        f"{stopped.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC: {' '.join(str(cause).split())[:300]}"
                    )
                if page["executions"] and page["executions"][-1]["startDate"] < oldest_start:
                    break  # newest first: every later page started too long ago to have ended since
    return status
