"""Starting stage B for a message: take the target partition's lease, plan, start the state machine.

The same protocol as stage A (``lakeline.commits``): a message while another run holds the target
partition waits in the partition's state and that run's follow-up takes it with every other waiting
message; the run token of a run a message starts is fixed by the message, so a redelivery takes the
same (re-entrant) lease, plans the same run and finds its execution already started.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lakeline.aws.stepfunctions import start_execution_once
from lakeline.commits import Lease, PartitionCommits, commit_key
from lakeline.commits.slots import RunSlots, start_in_slot
from lakeline.dependencies.resolve import partition_path
from lakeline.partitions import hand_over_reentered, new_run_token, run_token_time
from stage_b.messages import StageBMessage
from stage_b.plan import StageBPlan, leased_messages

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

logger = logging.getLogger(__name__)

# Plans ``message``'s run with ``run_token`` (under ``lease``, or unleased to validate it first).
Planner = Callable[[StageBMessage, str, Lease | None], StageBPlan]


@dataclass(frozen=True)
class StartedRun:
    execution_name: str
    duplicate: bool
    plan: StageBPlan | None  # None: the message waits for the run that holds the partition
    ended: bool = False  # a duplicate whose execution had already succeeded


def message_commit_key(message: StageBMessage) -> str:
    return commit_key(message.target_dataset, partition_path(message.partition))


def message_run_token(message: StageBMessage) -> str:
    """The run token of the run a message starts: fixed by the message (dated by its trigger's run)."""
    started = run_token_time(message.trigger.run or "")
    moment = datetime.fromtimestamp(started, UTC) if started is not None else None
    return new_run_token(moment, unique=message.deduplication_id())


def execution_name(plan: StageBPlan) -> str:
    """A Step Functions execution name (<= 80 chars of [A-Za-z0-9_-]) fixed by the run."""
    return f"{plan.target_table[:38]}-{hashlib.sha256(plan.run_token.encode()).hexdigest()[:40]}"


def begin_message(message: StageBMessage, plan: Planner, commits: PartitionCommits) -> StageBPlan | None:
    """Record the message in its target partition's state and, if no other run holds the partition, plan
    the run that takes it (with every other waiting message). ``None``: the message waits."""
    token = message_run_token(message)
    # Planned once without the lease first: a message that cannot be planned is refused before it
    # enters the partition's state, where it would hold up the messages behind it.
    unleased = plan(message, token, None)
    lease = commits.begin(
        message_commit_key(message),
        token,
        unleased.target_location,
        unleased.partition_root,
        [message.model_dump_json()],
    )
    return None if lease is None else plan(message, token, lease)


def plan_follow_up(handed_over: Lease, plan: Planner, commits: PartitionCommits) -> StageBPlan | None:
    """The plan of a follow-up run: the lease a finished run handed over, re-read (with the messages
    waiting now). ``None`` if the run no longer holds it (its lease expired and another run took it)."""
    lease = commits.resume(handed_over)
    if lease is None or not lease.pending:
        return None
    return plan(leased_messages(lease)[0], lease.owner, lease)


def start_plan(plan: StageBPlan, sfn: SFNClient, state_machine_arn: str, slots: RunSlots | None = None) -> StartedRun:
    """Start a leased plan's execution once it has one of the stage's ``slots`` (``NoRunSlot``: none is free)."""
    name = execution_name(plan)
    payload = json.dumps({"message": plan.message, "plan": plan.to_dict()})
    started = start_in_slot(slots, plan.run_token, lambda: start_execution_once(sfn, state_machine_arn, name, payload))
    if started.duplicate:
        logger.info("run %s already started as %s; redelivery ignored", plan.run_token, started.name)
    return StartedRun(started.name, started.duplicate, plan, ended=started.ended)


def start_leased(
    plan: StageBPlan,
    planner: Planner,
    commits: PartitionCommits,
    sfn: SFNClient,
    state_machine_arn: str,
    slots: RunSlots | None = None,
) -> StartedRun:
    """Start a leased plan's run. A message redelivered after its run ended takes that run's lease
    again (its run token is fixed by the message) and finds the execution done: nothing would ever
    end the lease, so it is handed to a follow-up run at once, which is started here."""
    started = start_plan(plan, sfn, state_machine_arn, slots)
    if started.ended and plan.lease is not None:
        handed = hand_over_reentered(commits, Lease.from_dict(plan.lease), root=plan.partition_root)
        follow_up = plan_follow_up(handed, planner, commits) if handed is not None else None
        if follow_up is not None:
            logger.info("run %s had ended; its partition's lease goes to run %s", plan.run_token, follow_up.run_token)
            return start_plan(follow_up, sfn, state_machine_arn, slots)
    return started
