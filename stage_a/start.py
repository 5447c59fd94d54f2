"""Starting stage A for an arrival: validate, take the partition's lease, plan against the catalog, start
the state machine.

An arrival while another run holds the partition's lease starts nothing: it waits in the partition's
state, and that run's follow-up takes it (see ``lakeline.commits``). The run token of a run an arrival
starts is fixed by the arrival, so a redelivery takes the same (re-entrant) lease, plans the same run
and finds its execution already started.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import IO, TYPE_CHECKING, Any, Protocol

from lakeline.aws.stepfunctions import start_execution_once
from lakeline.commits import Lease, PartitionCommits, PartitionState, TakenBatch, commit_key, finish_run
from lakeline.commits.batch import BatchMissing, BatchRef, read_batch
from lakeline.commits.slots import RunSlots, start_in_slot
from lakeline.engines.base import Column, TableNotFound, TableSchema
from lakeline.errors import LakelineError
from lakeline.names import check_identifier
from lakeline.partitions import hand_over_reentered, run_location
from lakeline.settings import PipelineSettings
from lakeline.storage import ObjectStore, join_location
from stage_a.arrivals import EXECUTION_NAME_UNSAFE, Arrival, pending_entry
from stage_a.by_name import copy_key, copy_version, in_table_order, newer_version
from stage_a.contract import ColumnsByName, ContractViolation, RawContract, RawFile, check_raw_file
from stage_a.keys import RawObject, parse_raw_key
from stage_a.plan import (
    MAX_FOLLOW_UP_WINDOWS,
    ManifestWriter,
    StageAPlan,
    filling,
    new_run_token,
    plan_stage_a,
    waiting_arrivals,
)
from stage_a.raw_files import CopyChanged, ExistingCopy, RawFileChanged

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

logger = logging.getLogger(__name__)
MAX_COPY_ATTEMPTS = 5


class Catalog(Protocol):
    def describe_table(self, database: str, table: str) -> TableSchema: ...

    def add_columns(self, database: str, table: str, columns: tuple[Column, ...]) -> None:
        """Add the columns a table lacks of ``columns``, after its own (idempotent)."""
        ...


class RawFiles(Protocol):
    def raw_file(self, arrival: Arrival) -> RawFile: ...

    def existing_copy(self, arrival: Arrival, key: str) -> ExistingCopy | None:
        """The by-name copy at ``key``, or ``None``."""
        ...

    def write_copy(
        self, arrival: Arrival, key: str, body: IO[bytes], made_from: str, replacing: ExistingCopy | None
    ) -> bool:
        """Write a copy next to the arrival's file, if ``key`` still holds ``replacing`` (``CopyChanged``
        otherwise); ``False``: it held those bytes already."""
        ...


@dataclass(frozen=True)
class ReadByName:
    """An arrival loaded through its copy in the table's column order and key spelling (``stage_a.by_name``)."""

    key: str
    copy_key: str
    written: bool  # False: the copy was there already (a redelivery or a rerun); its own arrival loads it
    reason: str


@dataclass(frozen=True)
class StartedRun:
    execution_name: str
    execution_arn: str | None
    duplicate: bool
    plan: StageAPlan | None  # None: nothing to run (its lease went to another run, or nothing waited)
    ended: bool = False  # a duplicate whose execution had already succeeded


def partition_commit_key(raw: RawObject, settings: PipelineSettings) -> str:
    return commit_key(
        f"{settings.stage_database(raw.team, raw.dataset)}.{raw.table}", raw.partition_prefix.split("/", 3)[3]
    )


def stage_partition_root(raw: RawObject, settings: PipelineSettings) -> str:
    return join_location(settings.stage_root, raw.partition_prefix)


def execution_name(dataset: str, table: str, run_token: str) -> str:
    """A Step Functions execution name (<= 80 chars of [A-Za-z0-9_-]) fixed by the run."""
    prefix = EXECUTION_NAME_UNSAFE.sub("-", f"{dataset}-{table}")[:38]
    return f"{prefix}-{hashlib.sha256(run_token.encode()).hexdigest()[:40]}"


def arrival_run_token(arrival: Arrival) -> str:
    """The run token of the run an arrival starts: fixed by the arrival (redeliveries plan the same run)."""
    return new_run_token(arrival.event_time, unique=arrival.identity)


def plan_arrival(arrival: Arrival, settings: PipelineSettings, catalog: Catalog) -> tuple[str, StageAPlan]:
    """The seed's whole-partition plan for an arrival, without a lease (``lakeline stage-a plan``)."""
    raw = arrival.raw
    schema = catalog.describe_table(settings.raw_database(raw.team, raw.dataset), raw.table)
    token = arrival_run_token(arrival)
    return execution_name(raw.dataset, raw.table, token), plan_stage_a(raw, settings, schema, run_token=token)


def check_arrival(
    arrival: Arrival, settings: PipelineSettings, catalog: Catalog, raw_file: RawFile, contract: RawContract
) -> TableSchema | None:
    """The door: the file keeps its raw table's contract (``stage_a.contract``). Returns the table's
    schema again if the file added columns to it (``add-columns``), else ``None``; raises
    ``ContractViolation`` with the reason otherwise (``ColumnsByName`` for a file to be loaded
    through a copy in the table's order)."""
    added = check_raw_file(contract, raw_file)
    if not added:
        return None
    # schema_evolution: add-columns. The stage table gets them too, or its runs would drop them.
    raw = arrival.raw
    database = settings.raw_database(raw.team, raw.dataset)
    for column in added:
        check_identifier(column.name, "column")
    for target in (database, settings.stage_database(raw.team, raw.dataset)):
        try:
            catalog.add_columns(target, raw.table, added)
        except TableNotFound as error:
            raise ContractViolation(f"{arrival.key}: cannot add its new columns: {error}") from error
    return catalog.describe_table(database, raw.table)


def _raw_schema(arrival: Arrival, database: str, table: str, catalog: Catalog) -> TableSchema:
    try:
        return catalog.describe_table(database, table)
    except TableNotFound as error:
        raise ContractViolation(f"{arrival.key}: no raw table {database}.{table} in the catalog") from error


def admit(arrival: Arrival, settings: PipelineSettings, catalog: Catalog, files: RawFiles) -> TableSchema | ReadByName:
    """The door (the raw table exists, and ``check_arrival``), and files read by name: an arrival whose
    CSV columns are in another order than its table's, or whose JSON keys are spelled in another case,
    or whose key has been read by name before,
    has its copy in the table's order written (``stage_a.by_name``), which arrives and is loaded in
    its place. Returns the raw table's schema for an arrival loaded as it is."""
    raw = arrival.raw
    schema = _raw_schema(arrival, settings.raw_database(raw.team, raw.dataset), raw.table, catalog)
    table_cfg = settings.table_settings(settings.stage_database(raw.team, raw.dataset), raw.table)
    contract = RawContract.of(schema, encoding=table_cfg.encoding, evolution=table_cfg.schema_evolution)
    copy = copy_key(arrival.key)
    raw_file = files.raw_file(arrival)  # one version of the file for the check and the copy
    try:
        grown = check_arrival(arrival, settings, catalog, raw_file, contract)
    except ColumnsByName as moved:
        if copy is None:
            raise
        reason, existing = str(moved), files.existing_copy(arrival, copy)
    else:
        if grown is not None:
            schema = grown
            contract = RawContract.of(schema, encoding=table_cfg.encoding, evolution=table_cfg.schema_evolution)
        existing = None if copy is None else files.existing_copy(arrival, copy)
        if copy is None or existing is None:
            return schema
        # Read by name before: the copy's key holds the file's rows, so this version replaces them there.
        reason = f"{arrival.key}: its earlier version was read by name through {copy}"
    version = copy_version(arrival)
    for _ in range(MAX_COPY_ATTEMPTS):
        if existing is not None and existing.made_from and not newer_version(version, existing.made_from):
            # This version's copy is there (a redelivery), or a later version's: it stays.
            return ReadByName(arrival.key, copy, False, reason)
        try:
            with in_table_order(contract, raw_file) as body:
                return ReadByName(arrival.key, copy, files.write_copy(arrival, copy, body, version, existing), reason)
        except RawFileChanged:
            # Replaced since it was checked: the new version's own arrival brings it to the door.
            return ReadByName(arrival.key, copy, False, f"{reason} (replaced since; its new version follows)")
        except CopyChanged:
            existing = files.existing_copy(arrival, copy)  # another version's router wrote it: decide again
    raise LakelineError(f"{arrival.key}: its copy {copy} kept changing while it was written")


@dataclass(frozen=True)
class EnteredArrival:
    """An arrival recorded in its partition's state that took the partition's lease: its run is planned and started
    (``start_entered``) once the other arrivals of its batch have entered too, so that the run takes them with it
    rather than leaving them to a follow-up run."""

    arrival: Arrival
    lease: Lease
    raw: RawObject
    schema: TableSchema  # its raw table's, as the door read it


@dataclass(frozen=True)
class WaitingArrival:
    """An arrival recorded in its partition's state behind the run that holds the partition's lease."""

    partition: str  # the partition's key in the commits table


def enter_arrival(
    arrival: Arrival, settings: PipelineSettings, catalog: Catalog, commits: PartitionCommits, files: RawFiles
) -> EnteredArrival | WaitingArrival | ReadByName:
    """Check the arrival at the door and record it in its partition's state, taking the partition's lease if no
    other run holds it (``EnteredArrival``), else waiting for that run (``WaitingArrival``); ``ReadByName``: its
    copy in the table's column order is loaded instead."""
    schema = admit(arrival, settings, catalog, files)
    if isinstance(schema, ReadByName):
        return schema
    raw = arrival.raw
    token = arrival_run_token(arrival)
    # Planned once without the lease first: an arrival that cannot be planned is refused before it
    # enters the partition's state, where it would hold up the arrivals behind it.
    plan_stage_a(raw, settings, schema, run_token=token)
    root = stage_partition_root(raw, settings)
    partition = partition_commit_key(raw, settings)
    lease = commits.begin(partition, token, run_location(root, token), root, [pending_entry(arrival)])
    return WaitingArrival(partition) if lease is None else EnteredArrival(arrival, lease, raw, schema)


def begin_arrival(
    arrival: Arrival,
    settings: PipelineSettings,
    catalog: Catalog,
    commits: PartitionCommits,
    files: RawFiles,
    manifests: ManifestWriter | None = None,
    lost: Callable[[str], None] = logger.error,
    slots: RunSlots | None = None,
) -> StageAPlan | ReadByName | None:
    """``enter_arrival``, then the plan of the run that took the lease (with every other arrival waiting).
    ``manifests``: where the plan's manifest is written (``plan_stage_a``)."""
    entered = enter_arrival(arrival, settings, catalog, commits, files)
    if isinstance(entered, WaitingArrival):
        return None
    if isinstance(entered, ReadByName):
        return entered
    return plan_entered(entered, settings, catalog, commits, manifests, lost, slots)


def plan_entered(
    entered: EnteredArrival,
    settings: PipelineSettings,
    catalog: Catalog,
    commits: PartitionCommits,
    manifests: ManifestWriter | None = None,
    lost: Callable[[str], None] = logger.error,
    slots: RunSlots | None = None,
    *,
    others_waiting: bool = False,
) -> StageAPlan | None:
    """The plan of the run an arrival leased (``plan_leased``). ``others_waiting``: arrivals of the partition
    entered after it (its own batch's): its lease is read again first, so that its run takes them rather than
    leaving them to a follow-up run. ``None``: nothing to run (its lease expired and another run took it, with
    the arrival)."""
    lease = commits.resume(entered.lease) if others_waiting else entered.lease
    if lease is None:
        return None
    return plan_leased(
        lease, settings, catalog, commits, manifests, raw=entered.raw, schema=entered.schema, lost=lost, slots=slots
    )


MAX_TAKE_ATTEMPTS = 3


def plan_leased(
    lease: Lease,
    settings: PipelineSettings,
    catalog: Catalog,
    commits: PartitionCommits,
    manifests: ManifestWriter | None = None,
    *,
    raw: RawObject | None = None,
    schema: TableSchema | None = None,
    lost: Callable[[str], None] = logger.error,
    slots: RunSlots | None = None,
) -> StageAPlan | None:
    """The plan of the run holding ``lease``, its batch taken out of ``pending`` (``PartitionCommits.take``, #39):
    while it works, what arrives fills the next batch instead of the partition's item. A redelivery plans the batch
    its run took already; a run whose lease comes with the batch of a run that ended without ending it (a
    redelivery planned it after that run's commit) takes that batch first. ``raw`` (and its raw table's
    ``schema``): the arrival that took the lease, else the batch's oldest. A batch to take over whose object is
    gone is reported to ``lost`` and its note ended (the partition's other arrivals run); ``None``: nothing else
    waited, and the lease is released."""
    for _ in range(MAX_TAKE_ATTEMPTS):
        planned_from = lease
        if lease.taken is not None:
            try:
                batch = read_batch(
                    _batch_store(commits), BatchRef(lease.taken.location, lease.taken.count), lease.taken.run
                )
            except BatchMissing as missing:
                if lease.takes_own_batch:
                    raise  # its run's end (the failure path) ends it and says so
                lost(
                    f"{lease.key}: {missing}, deleted while run {lease.taken.owner} had taken it: its "
                    f"{lease.taken.count} arrivals cannot be named; upload the partition's files that are not "
                    "loaded again"
                )
                dropped = commits.drop_taken(lease)
                if dropped.pending:
                    lease = dropped
                    continue
                finished = finish_run(commits, dropped, new_run_token, commits.read(lease.key).root or "")
                if finished.follow_up is None:
                    return None
                lease = finished.follow_up
                continue
            planned_from = replace(lease, pending=batch.pending)
        first = raw or parse_raw_key(waiting_arrivals(planned_from)[0].key)
        if schema is None:
            schema = catalog.describe_table(settings.raw_database(first.team, first.dataset), first.table)
        # A batch taken already is planned whole: cut again (a release with smaller batches), the rest would be lost.
        plan = plan_stage_a(
            first,
            settings,
            schema,
            run_token=lease.owner,
            lease=planned_from,
            manifests=manifests,
            whole=lease.taken is not None,
        )
        if plan.batch is None or plan.lease is None:
            raise LakelineError(f"run {lease.owner}'s plan names no batch")
        if lease.takes_own_batch:
            # A redelivery: its run's batch is taken already, and its lease says so.
            commits.forget_waiting(lease, planned_from.pending)
            return plan
        if slots is not None:
            # The batch is taken once the run may start (``NoRunSlot`` otherwise): a run that waits for a slot
            # takes what waits when it gets one, not the one arrival that found the partition free.
            slots.take(lease.owner)
        mine = TakenBatch(lease.owner, plan.batch.location, plan.target_location, plan.batch.count)
        held = commits.take(lease, mine, plan.lease["pending"])
        if held == mine:
            return replace(plan, lease={**plan.lease, "taken": mine.to_dict()})
        lease = replace(lease, taken=held)  # a redelivery of the same run took its batch first: plan that one
    raise LakelineError(f"run {lease.owner} could not take its batch in {MAX_TAKE_ATTEMPTS} attempts")


def _batch_store(commits: PartitionCommits) -> ObjectStore:
    if commits.lists is None:
        raise LakelineError(f"reading a taken batch of {commits.table_name} needs a store")
    return commits.lists


def plan_follow_up(
    handed_over: Lease,
    settings: PipelineSettings,
    catalog: Catalog,
    commits: PartitionCommits,
    manifests: ManifestWriter | None = None,
    lost: Callable[[str], None] = logger.error,
    slots: RunSlots | None = None,
) -> StageAPlan | None:
    """The plan of a follow-up run: the lease a finished run handed over, re-read (with the arrivals
    waiting now). ``None`` if the run no longer holds it (its lease expired and another run took it)."""
    lease = commits.resume(handed_over)
    if lease is None or not lease.waiting:
        return None
    return plan_leased(lease, settings, catalog, commits, manifests, lost=lost, slots=slots)


class PartitionStates(Protocol):
    def read(self, key: str) -> PartitionState: ...


def follow_up_wait(
    follow_up: Lease,
    windows_waited: int,
    commits: PartitionStates,
    window_seconds: int,
    *,
    clock: Callable[[], float] = time.time,
) -> int:
    """Seconds a follow-up its router just received waits again before it starts: ``window_seconds`` while the
    arrivals waiting for it are still ``filling`` its batch, at most ``MAX_FOLLOW_UP_WINDOWS`` times, else 0.
    Its run's end gave it one window (``stage_a.plan.follow_up_window``); a burst the routers record for longer
    than that would otherwise still run in batches of what one window gathered (#39: 10 runs for 2,000 files)."""
    if window_seconds <= 0 or windows_waited >= MAX_FOLLOW_UP_WINDOWS:
        return 0
    state = commits.read(follow_up.key)
    if state.lease_owner != follow_up.owner:
        return 0  # no longer its partition's: ``plan_follow_up`` says so and lets it go
    return window_seconds if filling(tuple(state.pending), state.last_waiting, clock()) else 0


def start_plan(
    plan: StageAPlan,
    sfn: SFNClient,
    state_machine_arn: str,
    extra_input: dict[str, Any] | None = None,
    slots: RunSlots | None = None,
) -> StartedRun:
    """Start the execution of a leased plan (its name is fixed by the run, so a retry is a duplicate), once it has
    one of the stage's ``slots`` (``NoRunSlot``: none is free; the run keeps its lease and is started later)."""
    name = execution_name(plan.dataset, plan.table, plan.run_token)
    # The failure path reads ``$.arrival``: a follow-up run has none of its own (it parks its arrivals).
    payload = {"plan": plan.to_dict(), "arrival": None, **(extra_input or {})}
    started = start_in_slot(
        slots, plan.run_token, lambda: start_execution_once(sfn, state_machine_arn, name, json.dumps(payload))
    )
    if started.duplicate:
        logger.info("run %s already started as %s; redelivery ignored", plan.run_token, started.name)
    return StartedRun(started.name, None, started.duplicate, plan, ended=started.ended)


def start_entered(
    entered: EnteredArrival,
    settings: PipelineSettings,
    catalog: Catalog,
    commits: PartitionCommits,
    sfn: SFNClient,
    state_machine_arn: str,
    manifests: ManifestWriter | None = None,
    slots: RunSlots | None = None,
    lost: Callable[[str], None] = logger.error,
    *,
    others_waiting: bool = False,
) -> StartedRun:
    """Plan (``plan_entered``) and start the run of an arrival that took its partition's lease (``NoRunSlot``: no
    slot is free; the run keeps its lease)."""
    plan = plan_entered(entered, settings, catalog, commits, manifests, lost, slots, others_waiting=others_waiting)
    if plan is None:
        return StartedRun("", None, False, None)
    arrival = {"arrival": entered.arrival.model_dump(mode="json")}
    started = start_plan(plan, sfn, state_machine_arn, arrival, slots)
    if started.ended and plan.lease is not None:
        # An arrival redelivered after its run ended took that run's lease again (its run token is
        # fixed by the arrival) and found the execution done: nothing would ever end the lease, so it
        # goes to a follow-up run at once, which takes the redelivery and anything else waiting.
        handed = hand_over_reentered(commits, Lease.from_dict(plan.lease), root=plan.stage_partition_root)
        follow_up = plan_follow_up(handed, settings, catalog, commits, manifests, lost, slots) if handed else None
        if follow_up is not None:
            logger.info("run %s had ended; its partition's lease goes to run %s", plan.run_token, follow_up.run_token)
            return start_plan(follow_up, sfn, state_machine_arn, slots=slots)
    return started
