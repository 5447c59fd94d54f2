"""Write-then-swap of one table partition, shared by stage A and stage B.

A run writes into a fresh prefix ``<partition root>/lakeline_run=<token>/`` through a CTAS, then points
the partition at it (``ADD IF NOT EXISTS`` then ``SET LOCATION``, which adds or swaps without knowing
which). Under the partition-commit protocol (``lakeline.commits``) the run holds the partition's lease,
commits its prefix as the partition's next version before the swap (``commit_write``), and the versions
it supersedes are deleted only after a grace period, when nothing references them (``sweep``).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import pydantic

from lakeline.commits import (
    DEFAULT_GRACE_SECONDS,
    Lease,
    LeaseLost,
    PartitionCommits,
    PartitionState,
    commit_partition,
    commit_table_root,
    finish_run,
    send_follow_up,
    sweep_partition,
)
from lakeline.engines.base import Column, Engine, QueryError
from lakeline.errors import InvalidInputError, validation_problems
from lakeline.names import check_identifier, ddl_name, dml_name, string_literal
from lakeline.run_order import FailedStep
from lakeline.settings import TableSettings
from lakeline.storage import (
    RUN_PREFIX,
    RUN_TOKEN_PATTERN,
    DeleteRefused,
    ObjectStore,
    join_location,
    manifest_prefix,
    parse_location,
    same_prefix,
)

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from lakeline.commits.slots import RunSlots

logger = logging.getLogger(__name__)

INTEGER_TYPES = frozenset({"tinyint", "smallint", "int", "integer", "bigint"})
STRING_TYPES = ("string", "varchar", "char")

PartitionValues = list[tuple[Column, str]]


def new_run_token(now: datetime | None = None, unique: str | None = None) -> str:
    """A token that sorts by time: ``20220120t101500123456_1a2b3c4d5e``.

    ``unique`` may carry a deterministic id (a Step Functions execution name) instead of a random one.
    """
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    suffix = uuid.uuid5(uuid.NAMESPACE_URL, unique).hex[:10] if unique else uuid.uuid4().hex[:10]
    return f"{moment:%Y%m%d}t{moment:%H%M%S%f}_{suffix}"


def run_token_time(token: str) -> float | None:
    """When the run of ``token`` was planned (epoch seconds), or ``None`` for a token not of our form."""
    if not RUN_TOKEN_PATTERN.fullmatch(token):
        return None
    return datetime.strptime(token[:21], "%Y%m%dt%H%M%S%f").replace(tzinfo=UTC).timestamp()


def commit_write(
    commits: PartitionCommits,
    lease: Lease,
    store: ObjectStore,
    *,
    carry_from: str | None,
    applied: Sequence[str],
    contribution: str | None = None,
    replaces: Sequence[str] = (),
    checked: str | None = None,
) -> PartitionState:
    """Make the run's prefix the partition's next version: carry the published version's files into it
    (incremental appends) except the ``replaces`` ones, count its files, and commit it (compare-and-swap
    on the version). ``contribution``: the key of the stage B append contribution the run wrote; the
    files it wrote are recorded as that contribution's; ``checked``, the summary of the checks the run passed.
    Idempotent, so the task can be retried."""
    recorded: tuple[str, list[str]] | None = None
    if contribution:
        # Listed before the carry; on a retry the prefix already holds carried files, which are the
        # published version's names.
        written = [file_name(uri) for uri in store.list_data_files(lease.location)]
        published = {file_name(uri) for uri in store.list_data_files(carry_from)} if carry_from else set()
        recorded = (contribution, [name for name in written if name not in published])
    if carry_from:
        store.carry_files(carry_from, lease.location, leave=frozenset(replaces))
    files = len(store.list_data_files(lease.location))
    return commits.commit(lease, publish=True, files=files, applied=applied, contribution=recorded, checked=checked)


def file_name(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[-1]


def sweep_state(
    commits: PartitionCommits, state: PartitionState, store: ObjectStore, *, grace_seconds: float
) -> list[str]:
    """Delete the partition's superseded versions past the grace period and crashed runs' leftovers,
    from its ``state`` as just read or written."""
    return sweep_partition(
        commits, state, store, grace_seconds=grace_seconds, run_prefix=RUN_PREFIX, token_time=run_token_time
    )


@dataclass(frozen=True)
class Settlement:
    """What ending a leased run left to do: the follow-up run's lease (queue it), what was swept."""

    follow_up: Lease | None
    swept: list[str] = field(default_factory=list)


def settle_run(
    commits: PartitionCommits,
    lease: Lease,
    store: ObjectStore,
    *,
    wrote: bool,
    root: str,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
    swapped: bool = True,
) -> Settlement:
    """After a leased run's publish (or a run with nothing to write): end the lease or hand it to the
    follow-up run, then sweep the partition. ``swapped``: the catalog now points at the committed version
    (the run's swap, or its reconcile), so the next run need not point it there again. Idempotent, so the
    post-update task can be retried."""
    if not wrote:
        try:
            commits.commit(lease, publish=False)
        except LeaseLost:
            return Settlement(None)
    version = lease.version + (1 if wrote else 0)
    finished = finish_run(commits, lease, new_run_token, root, catalog_version=version if swapped else None)
    return Settlement(finished.follow_up, sweep_state(commits, finished.state, store, grace_seconds=grace_seconds))


def hand_over_reentered(commits: PartitionCommits, lease: Lease, *, root: str) -> Lease | None:
    """The lease a redelivered arrival or message re-took (same run token) after its run had ended: no
    execution will end it, so hand it to a follow-up run now (returned: the caller starts it). What
    waits, the redelivery included, stays in the queue for that run, so nothing is dropped unapplied;
    ``None`` if the lease is no longer this run's."""
    return finish_run(commits, lease, new_run_token, root).follow_up


@dataclass(frozen=True)
class Abandoned:
    """A failed run's end: ``held`` is False when its lease had been lost (its arrivals still wait for
    the run that took the partition, so they must not be parked); ``follow_up`` as in ``Settlement``."""

    held: bool
    follow_up: Lease | None = None
    deleted: int = 0
    left: str = ""
    """Why the run's files could not be deleted (they stay; the run ends all the same), else empty."""


def abandon_run(commits: PartitionCommits, lease: Lease, store: ObjectStore, *, root: str) -> Abandoned:
    """After a failed run: delete its prefix unless it is the published version (a commit that went
    through before the failure), take its arrivals out of the partition's queue (the caller parks them
    with the reason), and hand the lease to a follow-up for whatever else waits, or release it."""
    state = commits.read(lease.key)
    deleted, left = 0, ""
    published = state.published is not None and same_prefix(state.published, lease.location)
    table, table_root = commit_partition(lease.key)[0], commit_table_root(lease.key, root)
    if not published:
        deleted, left = delete_run_files(store, lease.location, table_root, table)
    ended = _end_abandoned(commits, lease, state, root)
    if not published and not left and not _batch_taken_under(commits, lease):
        # The run's manifests (stage A's, its batch, the list of what it applied) go with its files, once its lease
        # is ended: until then a retry reads its batch there. Not when its files stay (the catalog says they are
        # published: a lost state item), as its list then says what the published version holds.
        manifests, left = delete_run_files(store, manifest_prefix(lease.location), table_root, table)
        deleted += manifests
    return replace(ended, deleted=deleted, left=left)


def _batch_taken_under(commits: PartitionCommits, lease: Lease) -> bool:
    """Whether the partition's item notes a batch under the run's prefix: one a redelivery of the run's arrival (its
    run token fixed by the arrival) took after the run had ended its own (#39). Its object is the only record of those
    arrivals; the sweep deletes the prefix's manifests once nothing refers to them."""
    taken = commits.read(lease.key).taken
    return taken is not None and same_prefix(taken.run, lease.location)


def _end_abandoned(commits: PartitionCommits, lease: Lease, state: PartitionState, root: str) -> Abandoned:
    if state.lease_owner != lease.owner:
        return Abandoned(False)
    try:
        commits.commit(lease, publish=False)
    except LeaseLost:
        return Abandoned(False)
    return Abandoned(True, finish_run(commits, lease, new_run_token, root).follow_up)


def delete_run_files(store: ObjectStore, location: str, table_root: str, table: str) -> tuple[int, str]:
    """Delete a failed run's files; how many, and why they could not be if they could not (a location the
    function is not granted: the run must still end and its input be parked, so the refusal is reported
    with it instead of failing the failure path)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return store.delete_prefix(location, table_root=table_root, table=table), ""
    except (ClientError, BotoCoreError, OSError, DeleteRefused) as error:
        return 0, f"its files under {location} were left: {' '.join(str(error).split())}"


def no_follow_up_delay(_follow_up: Lease) -> int:
    """A follow-up starts as soon as its router takes it (stage B's, and stage A's with no window)."""
    return 0


@dataclass(frozen=True)
class LeasedRunEnd:
    """Ending a leased run, from the stage's post-update or failure function: settle or abandon the run's
    lease and queue the follow-up run (if any) on the stage's own queue, whose router starts it."""

    commits: PartitionCommits
    store: ObjectStore
    sqs: SQSClient
    queue_url: str
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    slots: RunSlots | None = None  # the stage's runs in flight (``lakeline.commits.slots``)
    follow_up_delay: Callable[[Lease], int] = no_follow_up_delay
    """Seconds a follow-up waits before its router starts it (stage A: ``stage_a.plan.follow_up_window``)."""

    def _pass_on(self, lease: dict[str, Any], follow_up: Lease | None) -> None:
        """The run's slot to its follow-up (or given back), then the follow-up queued, in that order."""
        self._end_slot(lease, follow_up)
        if follow_up is not None:
            send_follow_up(self.sqs, self.queue_url, follow_up, delay_seconds=self.follow_up_delay(follow_up))

    def _end_slot(self, lease: dict[str, Any], follow_up: Lease | None) -> None:
        """The run is over: its slot passes to its follow-up run (``RunSlots.hand_over``), which then starts
        without waiting for one, or goes back. After the lease is settled, so a retry after a crash between finds
        the same follow-up (``finish`` is idempotent) and hands the slot over then."""
        if self.slots is None:
            return
        owner = Lease.from_dict(lease).owner
        if follow_up is None or not self.slots.hand_over(owner, follow_up.owner):
            self.slots.release(owner)

    def after_publish(self, lease: dict[str, Any], *, wrote: bool, root: str) -> Settlement:
        settled = settle_run(
            self.commits, Lease.from_dict(lease), self.store, wrote=wrote, root=root, grace_seconds=self.grace_seconds
        )
        self._pass_on(lease, settled.follow_up)
        return settled

    def after_failed_post_update(self, lease: dict[str, Any], *, wrote: bool, root: str) -> Settlement:
        """End a published run's lease after its post-update failed, as the post-update would have, unless
        that post-update ended it already: then it may be a follow-up run's lease now (handed over, even
        committed), which an idempotent repeat of ``after_publish`` would end under it."""
        taken = Lease.from_dict(lease)
        if self.commits.read(taken.key).lease_owner != taken.owner:
            self._end_slot(lease, None)  # handed over already, or given back: nothing, else given back now
            return Settlement(None)
        return self.after_publish(lease, wrote=wrote, root=root)

    def after_failure(self, lease: dict[str, Any], *, failed_step: FailedStep, root: str) -> Abandoned:
        """A failure after the commit (the catalog swap) keeps the committed version (the next run points
        the catalog at it); any other abandons the run's output. ``held`` says whether the run's arrivals
        are the caller's to park."""
        if failed_step == "publish":
            settled = settle_run(self.commits, Lease.from_dict(lease), self.store, wrote=True, root=root, swapped=False)
            self._pass_on(lease, settled.follow_up)
            return Abandoned(True, settled.follow_up, 0)
        abandoned = abandon_run(self.commits, Lease.from_dict(lease), self.store, root=root)
        self._pass_on(lease, abandoned.follow_up)
        return abandoned


def check_run_token(token: str) -> str:
    if not RUN_TOKEN_PATTERN.fullmatch(token):
        raise InvalidInputError(f"run token {token!r} is not of the form made by new_run_token")
    return token


PlanT = TypeVar("PlanT")


_ADAPTERS: dict[type, pydantic.TypeAdapter[Any]] = {}


def validated_plan(plan_type: type[PlanT], data: Any, what: str) -> PlanT:
    """A plan dataclass rebuilt from what a state machine passed on, validated by pydantic against the
    dataclass's own field types (lists become the tuples they were, nested steps their dataclass):
    ``InvalidInputError`` naming every wrong or missing field, in the one wording of
    ``lakeline.errors.validation_problems``."""
    if not isinstance(data, Mapping):
        raise InvalidInputError(f"invalid {what}: must be an object, not {type(data).__name__}")
    try:
        adapter = _ADAPTERS.get(plan_type) or _ADAPTERS.setdefault(plan_type, pydantic.TypeAdapter(plan_type))
        plan: PlanT = adapter.validate_python(dict(data))
        return plan
    except pydantic.ValidationError as error:
        raise InvalidInputError(f"invalid {what}: " + "; ".join(validation_problems(error))) from None


def check_run_location(target_location: str, partition_root: str, run_token: str, what: str) -> None:
    """A run writes, and its failure path deletes, only its own prefix under the partition root (compared
    parsed: a location is a path, not a string to match)."""
    if parse_location(target_location) != parse_location(run_location(partition_root, run_token)):
        raise InvalidInputError(
            f"{what}'s target_location {target_location!r} is not its run's prefix under {partition_root!r}"
        )


def partition_literal(column: Column, value: str) -> str:
    """The SQL literal of a partition value, by the partition column's type."""
    kind = column.type.lower().split("(")[0].strip()
    if kind.startswith(STRING_TYPES):
        return string_literal(value)
    if kind in INTEGER_TYPES:
        if not re.fullmatch(r"-?\d{1,19}", value):
            raise InvalidInputError(f"partition {column.name}={value!r} is not an integer ({column.type})")
        return value
    if kind == "date":
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            raise InvalidInputError(f"partition {column.name}={value!r} is not a date YYYY-MM-DD")
        return f"DATE {string_literal(value)}"
    raise InvalidInputError(f"partition column {column.name} has unsupported type {column.type}")


def partition_filter(partition: PartitionValues) -> str:
    """``"col" = literal AND ...`` (empty for an unpartitioned table)."""
    return " AND ".join(f"{dml_name(column.name)} = {partition_literal(column, value)}" for column, value in partition)


def partition_spec_sql(partition: PartitionValues) -> str:
    return ", ".join(f"{ddl_name(column.name)}={string_literal(value)}" for column, value in partition)


def partition_prefix(partition: PartitionValues) -> str:
    return "".join(f"{column.name}={value}/" for column, value in partition)


def run_location(partition_root: str, run_token: str) -> str:
    return join_location(partition_root, f"{RUN_PREFIX}{check_run_token(run_token)}")


def temp_table_name(table: str, run_token: str) -> str:
    return check_identifier(f"lakeline_tmp_{table[:60]}_{check_run_token(run_token)}", "temp table")


def swap_statements(
    database: str, table: str, partition: PartitionValues, location: str, *, exists: bool = False
) -> tuple[str, ...]:
    """Point the partition (or the unpartitioned table) at ``location``, adding it if new. ``exists``:
    the partition is known to be in the catalog (one statement instead of two)."""
    name = ddl_name(database, table)
    if not partition:
        return (f"ALTER TABLE {name} SET LOCATION {string_literal(location)}",)
    spec = partition_spec_sql(partition)
    if exists:
        return (f"ALTER TABLE {name} PARTITION ({spec}) SET LOCATION {string_literal(location)}",)
    return (
        f"ALTER TABLE {name} ADD IF NOT EXISTS PARTITION ({spec}) LOCATION {string_literal(location)}",
        f"ALTER TABLE {name} PARTITION ({spec}) SET LOCATION {string_literal(location)}",
    )


def ctas_sql(
    database: str, temp_table: str, location: str, table_settings: TableSettings, bucketed_by: list[str], select: str
) -> str:
    """Athena CTAS of ``select`` into ``location``: format, compression and exactly-N-files bucketing
    (none when ``bucketed_by`` is empty)."""
    properties = [
        f"format = {string_literal(table_settings.format)}",
        f"external_location = {string_literal(location)}",
    ]
    if bucketed_by:
        columns = ", ".join(string_literal(check_identifier(c, "bucket column")) for c in bucketed_by)
        properties += [f"bucketed_by = ARRAY[{columns}]", f"bucket_count = {table_settings.bucket_count}"]
    if table_settings.compression != "NONE":
        properties.append(f"write_compression = {string_literal(table_settings.compression)}")
    return f"CREATE TABLE {dml_name(database, temp_table)} WITH ({', '.join(properties)}) AS {select}"


def bucket_columns(table_settings: TableSettings, data_columns: list[str], table: str) -> list[str]:
    """The configured bucket columns, or the first data column; each must be a data column."""
    chosen = list(table_settings.bucketed_by) or data_columns[:1]
    if not chosen:
        raise InvalidInputError(f"table {table} has no data columns")
    missing = [column for column in chosen if column not in data_columns]
    if missing:
        raise InvalidInputError(f"bucket columns {missing} are not columns of {table}")
    return chosen


def drop_temp_table(
    engine: Engine, drop_sql: str | None, database: str, temp_table: str, failure: QueryError | None
) -> list[str]:
    """Drop the run's temp table whatever happened before; return the query id.

    If the drop fails too, the run's own failure is what the caller raises (with a note about the
    drop); a drop that fails after a successful write is raised.
    """
    if not drop_sql:
        return []
    try:
        return [engine.execute(drop_sql, database=database).query_id]
    except QueryError as drop_error:
        if failure is None:
            raise
        failure.add_note(f"dropping temp table {temp_table} also failed: {drop_error}")
        return []


def raise_abandoned(failure: Exception, abandoned: tuple[int, str], run: str) -> NoReturn:
    """Raise ``failure``, the error of ``run``'s writes, once their output is abandoned: ``abandoned`` is how many
    objects were deleted and why any could not be (``delete_run_files``), which is logged."""
    _, left = abandoned
    if left:
        logger.warning("%s failed and %s", run, left)
    raise failure


def run_statements(engine: Engine, statements: Sequence[str], database: str) -> list[str]:
    return [engine.execute(statement, database=database).query_id for statement in statements]
