"""``lakeline stage-a run`` and ``lakeline stage-b run``: one arrival, or one target partition, through the
embedded runtime (``EventFlow``) as every other run goes: the router's lease, the SQL, the partition commit
(its applied ids make a repeat a no-op), the catalog swap, the post-update with its grace-period sweep.

Stage A routes nothing onwards here: no dependency item is registered, so its post-update finds no target.
Stage B runs what the registered items route onwards (``run_target``'s caller registers only the target's
own item when the chain is not wanted)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lakeline.errors import InvalidInputError
from lakeline.runtimes.embedded.event_flow import CANNOT_BE_PLANNED, EventFlow, FlowReport
from lakeline.runtimes.embedded.stage_a import partition_row_count
from lakeline.storage import LocalObjectStore, join_location
from stage_a.keys import parse_raw_key
from stage_a.plan import StageAPlan
from stage_b.messages import StageBMessage
from stage_b.plan import StageBPlan

NOT_ROUTED = ": not routed: "  # in an unrouted target's description (``stage_b.routing.Unrouted.describe``)


@dataclass(frozen=True)
class Mark:
    """Where a flow's report stood before a command's run: what the run added comes after."""

    stage_a: int
    stage_b: int
    duplicates: int
    failures: int
    quarantined: int

    @classmethod
    def of(cls, report: FlowReport) -> Mark:
        return cls(
            len(report.stage_a), len(report.stage_b), len(report.duplicates), len(report.failures),
            len(report.quarantined),
        )  # fmt: skip


@dataclass
class ArrivalRun:
    """What one arrival's stage A did: the run that published (``None``: nothing new, a repeat)."""

    table: str
    partition: dict[str, str]
    plan: StageAPlan | None
    location: str | None
    rows: int
    files: list[str]
    superseded_deleted: list[str]
    failures: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "partition": self.partition,
            "location": self.location,
            "rows": self.rows,
            "files": self.files,
            "superseded_deleted": self.superseded_deleted,
            "statements": self.plan.statements if self.plan else [],
            "duplicate": self.plan is None and not self.failures,
        }


def run_arrival(flow: EventFlow, key: str) -> ArrivalRun:
    """Send the raw file ``key`` (under the workspace's raw folder) and run stage A until the flow is idle.
    ``InvalidInputError`` if it is not there or was refused at the door (quarantined, with the reason)."""
    raw = parse_raw_key(key)
    if not (flow.workspace.raw_dir / raw.key).is_file():
        raw_dir = flow.workspace.raw_dir
        raise InvalidInputError(f"no raw file at {raw_dir / raw.key}: put arrivals under {raw_dir}")
    store = LocalObjectStore()
    database, partition = flow.settings.stage_database(raw.team, raw.dataset), dict(raw.partition)
    root = join_location(flow.settings.stage_root, raw.partition_prefix)
    before = set(store.list_child_prefixes(root))
    mark = Mark.of(flow.report)
    flow.arrive(key)
    report = flow.run_until_idle()
    if report.quarantined[mark.quarantined :]:
        raise InvalidInputError("; ".join(report.quarantined[mark.quarantined :]))
    plans = report.stage_a[mark.stage_a :]
    unroute(flow, plans)
    plan = plans[-1] if plans else None
    # What the catalog points at now: this run's version, or (nothing new) the one published before.
    location = plan.target_location if plan else flow.engine.partition_location(database, raw.table, partition)
    gone = sorted(before - set(store.list_child_prefixes(root)))
    exists = flow.engine.table_exists(database, raw.table)
    return ArrivalRun(
        table=f"{database}.{raw.table}",
        partition=partition,
        plan=plan,
        location=location,
        rows=partition_row_count(flow.engine, database, raw.table, partition) if exists else 0,
        files=store.list_data_files(location) if location else [],
        superseded_deleted=gone,
        failures=report.failures[mark.failures :],
    )


@dataclass
class TargetRuns:
    """What one stage B message and the runs it triggered did."""

    built: list[StageBPlan]
    repeated: list[str]  # the nodes whose message was applied already: nothing new
    failures: list[str]

    @property
    def refused(self) -> list[str]:
        """The failures of messages that could not be planned (the router refuses them before any run)."""
        return [failure for failure in self.failures if CANNOT_BE_PLANNED in failure]

    def to_dict(self) -> dict[str, Any]:
        store = LocalObjectStore()
        runs = [
            {
                "dataset": plan.dataset,
                "partition": plan.partition,
                "skipped": False,
                "files": store.list_data_files(plan.target_location) if plan.writes else [],
                "statements": plan.statements,
            }
            for plan in self.built
        ]
        for node in self.repeated:
            dataset, _, path = node.partition("/")
            partition = dict(part.split("=", 1) for part in path.split("/") if "=" in part)
            runs.append({"dataset": dataset, "partition": partition, "skipped": True, "files": [], "statements": []})
        failed = [failure for failure in self.failures if NOT_ROUTED not in failure]
        return {
            "runs": runs,
            "failed": [dict(zip(("node", "error"), failure.split(": ", 1), strict=False)) for failure in failed],
            "unrouted": [failure for failure in self.failures if NOT_ROUTED in failure],
        }


def run_target(flow: EventFlow, message: StageBMessage, *, chain: bool = True) -> TargetRuns:
    """Send ``message`` to queue B, as a finished partition's routing does, and run stage B until the flow is
    idle (the targets it triggers too, as far as the registered dependency items route it; ``chain``: the
    caller registered every item, else only the target's own, whose routing is then left to the next run)."""
    mark = Mark.of(flow.report)
    flow.cloud.sqs.send_message(QueueUrl=flow.cloud.queue_urls["queue-b"], MessageBody=message.model_dump_json())
    report = flow.run_until_idle()
    if not chain:
        unroute(flow, report.stage_b[mark.stage_b :])
    return TargetRuns(
        built=report.stage_b[mark.stage_b :],
        repeated=report.duplicates[mark.duplicates :],
        failures=report.failures[mark.failures :],
    )


def unroute(flow: EventFlow, plans: Sequence[StageAPlan | StageBPlan]) -> None:
    """A single-stage command routes what it publishes without the project's dependency items (stage A's: none;
    ``stage-b run --no-chain``'s: the target's own), so its post-update noted routed a version the items would
    route onwards: the note is undone, and the next run of the pipeline that takes the partition routes it."""
    for plan in plans:
        if plan.lease is not None:
            flow.commits.forget_routed(str(plan.lease["key"]), plan.target_location)
