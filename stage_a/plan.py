"""Planning a CTAS-simulated insert of one raw partition into its stage table.

Athena cannot control how many files an INSERT writes, but a CTAS with ``bucket_count`` can. The plan
(after the seed's "simulating insert using CREATE TABLE AS SELECT"):

1. register the raw partition (``ADD IF NOT EXISTS``), so the new file is visible;
2. CTAS a uniquely named temp table over the whole raw partition into a fresh prefix
   ``<stage partition>/lakeline_run=<token>/``: exactly ``bucket_count`` files;
3. DROP the temp table (metadata only; the files stay), also when the CTAS fails;
4. point the stage partition at the fresh prefix: ``ADD IF NOT EXISTS`` then ``SET LOCATION``, which
   together add a new partition or swap an existing one without knowing which it is;
5. delete the run prefixes older than this one.

Nothing is deleted before the new data is in place, so readers see either the old or the new
partition, never an empty or half-written one.

Planned under a partition lease (``lakeline.commits``), the run takes every arrival waiting for the
partition and the table's write policy decides what it writes:

- ``rewrite``: the whole raw partition, as above (the seed's protocol);
- ``incremental`` (default): only the new files' rows, one file, into the fresh
  prefix, into which the published version's files are then carried over (hard links locally, S3
  server-side copies in the cloud); when that would exceed the table's ``max_files``, or a file already
  loaded arrives again with new content, the run compacts instead: every loaded file's rows again, into
  exactly ``bucket_count`` files. A file whose arrival was already applied is not read again.

A leased run reads its files (its batch's new files, or for a compaction or a ``rewrite`` run every file the
partition loaded) through a manifest the plan writes (``stage_a.manifest``), never a list in its SQL: the
statements stay the same size whatever the batch or the partition holds. Its type check reads the new files
through a manifest of their own.

Every leased plan first points the partition at its committed version (``reconcile``), which repairs a
crash between a commit and its catalog swap before anything is read.

A run takes a bounded batch of what waits (``run_batch``): the oldest arrivals, at most ``MAX_RUN_ARRIVALS``
of them holding at most ``MAX_RUN_ARRIVAL_BYTES``. The rest stay in ``pending``, and the run's end hands the lease
to a follow-up run that takes the next batch, until nothing waits. The batch (its lease's ``pending`` entries and
its ``applied`` ids) is written as one object in the run's manifest prefix (``lakeline.commits.batch``), and its
entries leave the partition's state when the run is planned (``stage_a.start.plan_leased``); the state machine
input carries where it is (``batch``), not the lists, and whoever ends the run reads it back
(``StageAPlan.with_batch``). The SQL is carried once
(``statements`` is derived, not passed on).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, Protocol

from lakeline.commits import MAX_PENDING_BYTES, Lease
from lakeline.commits.batch import BatchReader, BatchRef, RunBatch, bounded_batch, read_batch, write_batch
from lakeline.engines.base import Column, TableSchema
from lakeline.errors import InvalidInputError
from lakeline.names import check_identifier, ddl_name, dml_name, string_literal
from lakeline.partitions import (
    bucket_columns,
    check_run_location,
    check_run_token,
    ctas_sql,
    new_run_token,
    partition_filter,
    partition_spec_sql,
    run_location,
    swap_statements,
    temp_table_name,
    validated_plan,
)
from lakeline.quality.gate import QualityGate
from lakeline.settings import PipelineSettings, TableSettings
from lakeline.storage import (
    MANIFEST_OBJECT,
    RUN_PREFIX,
    LocalObjectStore,
    join_location,
    manifest_object,
    manifest_prefix,
    parse_location,
    table_root_of,
)
from stage_a.arrivals import Arrival, pending_arrival
from stage_a.by_name import copy_key
from stage_a.keys import RawObject, parse_raw_key
from stage_a.manifest import ManifestSource, plan_source
from stage_a.type_check import TypeCheck, plan_type_check

__all__ = ["MAX_RUN_ARRIVALS", "MAX_RUN_ARRIVAL_BYTES", "RUN_PREFIX", "StageAPlan", "new_run_token", "plan_stage_a"]

WriteMode = Literal["rewrite", "compact", "append", "none"]

MAX_RUN_ARRIVALS = 400
"""The most arrivals one run takes: about what the partition's item lets wait (``MAX_PENDING_BYTES``, ~200 bytes
an arrival with a 70-character key), so a run takes all that waits. They cost its state machine input nothing
(its batch is an object it names, #39); each is one file its failure path parks and one lineage tree."""
MAX_RUN_ARRIVAL_BYTES = MAX_PENDING_BYTES
"""The most bytes of ``pending`` entries one run takes: keys longer than the realistic ones make smaller
batches, as they make the item hold fewer (one arrival is always taken)."""


class ManifestWriter(Protocol):
    def write_text(self, location: str, text: str) -> None: ...


def write_manifest(folder: str, text: str, writer: ManifestWriter | None) -> None:
    """Write a run's manifest (``stage_a.manifest``) into ``folder``; without ``writer``, only on the local disk."""
    location = folder + MANIFEST_OBJECT
    _writer(location, writer, "the plan's manifest").write_text(location, text)


def _writer(location: str, writer: ManifestWriter | None, what: str) -> ManifestWriter:
    """``writer``, or the local disk for a ``file://`` location."""
    if writer is not None:
        return writer
    if parse_location(location).scheme != "file":
        raise InvalidInputError(f"{what} {location} needs a store to be written to")
    return LocalObjectStore()


def arrival_id(key: str, version: str) -> str:
    """A raw file's arrival in the partition state: the key and the object version (S3 sequencer or a
    content hash), so a redelivery is the same arrival and a re-sent file with new content is not."""
    return f"{key}@{version}"


def arrival_key(identity: str) -> str:
    return identity.rsplit("@", 1)[0]


def _age(arrival: Arrival) -> tuple[Any, str, str]:
    return (arrival.event_time, arrival.key, arrival.sequencer)


def waiting_arrivals(lease: Lease) -> list[Arrival]:
    """The arrivals a lease holds (``pending``, entries of ``stage_a.arrivals.pending_entry``), oldest first."""
    return sorted((pending_arrival(entry) for entry in lease.pending), key=_age)


def run_batch(lease: Lease) -> Lease:
    """The lease as one run takes it: its ``pending`` cut to the oldest arrivals, at most ``MAX_RUN_ARRIVALS``
    of them costing at most ``MAX_RUN_ARRIVAL_BYTES``, each entry as the partition's state holds it (so the
    run's commit takes exactly these out of it). What is left waits for the follow-up run."""
    waiting = sorted(((pending_arrival(entry), entry) for entry in lease.pending), key=lambda pair: _age(pair[0]))
    batch = bounded_batch(
        waiting,
        lambda pair: len(pair[1].encode()),
        max_items=MAX_RUN_ARRIVALS,
        max_bytes=MAX_RUN_ARRIVAL_BYTES,
    )
    return replace(lease, pending=tuple(sorted(entry for _, entry in batch)))


@dataclass(frozen=True)
class StageAPlan:
    raw_key: str
    team: str
    dataset: str
    table: str
    source_database: str
    target_database: str
    partition: dict[str, str]
    run_token: str
    temp_table: str
    raw_partition_location: str
    stage_partition_root: str
    target_location: str
    bucket_count: int
    register_raw: str | None
    ctas: str
    drop_temp: str
    publish: tuple[str, ...]
    mode: WriteMode = "rewrite"
    applied: tuple[str, ...] = ()
    """The ids of the arrivals whose rows this run adds (committed with it); in its batch object when ``batch``."""
    carry_from: str | None = None  # incremental append: the published prefix whose files join the new one
    reconcile: tuple[str, ...] = ()  # point the partition at its committed version before reading it
    type_check: TypeCheck | None = None  # CSV or JSON lines: the run's new files read as text, before the CTAS
    source: ManifestSource | None = None  # compaction and rewrite: the CTAS reads the files its manifest lists
    lease: dict[str, Any] | None = field(default=None, compare=False)
    """The run's lease; its ``pending`` is the run's batch (``run_batch``), the arrivals it takes (in its batch
    object when ``batch``)."""
    batch: BatchRef | None = None
    """Where the run's batch is kept (its ``pending`` entries and ``applied`` ids): what the plan passes on
    instead of them (``to_dict``); read back with ``with_batch``. ``None``: a plan from before (both inline)."""
    quality: QualityGate | None = None  # the table's checks (its settings'), run before the commit (#41)
    batch_read: bool = field(default=True, compare=False, repr=False)
    """The lists are here (the plan as made, or read back); ``False`` in a plan passed on, until ``with_batch``."""

    @property
    def statements(self) -> list[str]:
        """Every statement in the order it runs (the DROP runs whether or not the CTAS succeeds)."""
        if self.mode == "none":
            return list(self.reconcile)
        head = [self.register_raw] if self.register_raw else []
        if self.type_check:
            head += [self.type_check.create, self.type_check.check, self.type_check.drop]
        if self.source:
            return [
                *self.reconcile,
                *head,
                self.source.create,
                self.ctas,
                self.drop_temp,
                self.source.drop,
                *self.publish,
            ]
        return [*self.reconcile, *head, self.ctas, self.drop_temp, *self.publish]

    @property
    def writes(self) -> bool:
        return self.mode != "none"

    @property
    def stage_table(self) -> str:
        """The stage table, ``database.table``."""
        return f"{self.target_database}.{self.table}"

    @property
    def table_root(self) -> str:
        """The stage table's location: the run deletes only run prefixes under it."""
        return table_root_of(self.stage_partition_root, self.partition)

    @property
    def arrivals(self) -> list[Arrival]:
        """The arrivals this run takes (its lease's batch), oldest first; none without a lease."""
        return waiting_arrivals(self.taken_lease()) if self.lease is not None else []

    def taken_lease(self) -> Lease:
        """The run's lease with its batch (what its commit, or its failure path, takes out of ``pending``)."""
        if self.lease is None:
            raise InvalidInputError(f"the plan of run {self.run_token} holds no lease")
        self._check_batch_read()
        return Lease.from_dict(self.lease)

    def _check_batch_read(self) -> None:
        if not self.batch_read:
            # Without it, a commit would take nothing out of ``pending`` and record nothing as applied.
            raise InvalidInputError(f"run {self.run_token}'s batch is at {self.batch}: read it first (with_batch)")

    def with_batch(self, store: BatchReader) -> StageAPlan:
        """The plan with its batch's lists, read from ``store`` if it was passed on without them (``to_dict``):
        ``BatchMissing`` if its object is gone."""
        if self.batch_read or self.batch is None or self.lease is None:
            return replace(self, batch_read=True)
        batch = read_batch(store, self.batch, self.target_location)
        return replace(
            self, applied=batch.applied, lease={**self.lease, "pending": list(batch.pending)}, batch_read=True
        )

    @property
    def arrival_keys(self) -> list[str]:
        """The raw keys of the arrivals this run takes (its own key for a run without a lease)."""
        return [arrival.key for arrival in self.arrivals] or [self.raw_key]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StageAPlan:
        """Rebuild a plan passed through a state machine; missing fields are an error, others are ignored
        (the ``arrivals`` and ``statements`` copies of a plan from before an upgrade, still in flight)."""
        plan = validated_plan(cls, {k: v for k, v in data.items() if k != "batch_read"}, "stage A plan")
        check_run_location(plan.target_location, plan.stage_partition_root, plan.run_token, "stage A plan")
        if plan.batch is not None and plan.lease is not None:
            # Its lists are in its batch object (a plan from before holds them inline: ``batch`` is ``None``).
            return replace(plan, applied=(), lease={**plan.lease, "pending": []}, batch_read=False)
        return plan

    def to_dict(self) -> dict[str, Any]:
        """The plan as a state machine passes it on: with a ``batch``, without its lists (the object has them)."""
        self._check_batch_read()
        data = asdict(self)
        del data["batch_read"]
        for name in ("publish", "applied", "reconcile"):
            data[name] = list(getattr(self, name))
        if self.batch is not None and data["lease"] is not None:
            data["applied"] = []
            data["lease"]["pending"] = []
        return data


def check_partition_columns(raw: RawObject, schema: TableSchema) -> list[tuple[Column, str]]:
    """The key's partition columns must be the table's, in the table's order."""
    key_columns = [column for column, _ in raw.partition]
    if key_columns != schema.partition_names:
        raise InvalidInputError(
            f"key {raw.key!r} has partition columns {key_columns}, but table "
            f"{schema.database}.{schema.table} is partitioned by {schema.partition_names}"
        )
    return [(column, value) for column, (_, value) in zip(schema.partition_columns, raw.partition, strict=True)]


def _write_mode(table_cfg: TableSettings, lease: Lease | None, new: Sequence[str]) -> tuple[WriteMode, list[str]]:
    """What a run writes and which arrivals' files it reads (empty: the whole raw partition)."""
    if lease is None:
        return "rewrite", []
    loaded = {arrival_key(identity) for identity in lease.applied}
    arrived = {arrival_key(identity) for identity in new}
    # A CSV file read by name (stage_a.by_name) is read through its copy from then on: its own key, if
    # it was loaded before the copy existed, holds a version whose rows the copy replaces.
    every = loaded | arrived
    superseded = {key for key in every if copy_key(key) in every}
    read = sorted(every - superseded)
    if table_cfg.write_policy == "rewrite":
        # The files the partition accepted at the door, not whatever sits in its raw folder: a file
        # refused there would load into the wrong columns, or fail every rewrite of its partition.
        return "rewrite", read
    if not new:
        return "none", []
    replaced = loaded & arrived or (arrived - loaded) & {copy_key(key) for key in loaded}
    if lease.published is None or replaced or lease.files + 1 > table_cfg.file_limit:
        return "compact", read
    return "append", sorted(arrived - superseded)


def plan_stage_a(
    raw: RawObject,
    settings: PipelineSettings,
    raw_schema: TableSchema,
    *,
    run_token: str,
    table_settings: TableSettings | None = None,
    lease: Lease | None = None,
    manifests: ManifestWriter | None = None,
    whole: bool = False,
) -> StageAPlan:
    """The plan of one run for ``raw``'s partition. Without a lease: the seed's whole-partition rewrite.
    Under a lease (``run_token`` is its owner): the table's write policy over a batch of the lease's
    arrivals (``run_batch``; with ``whole``, all of them: a batch taken already, which is never cut again). A run
    that reads the partition's loaded files (a compaction, a rewrite) reads
    them through a manifest, written here into ``manifests`` (the local disk when ``None``)."""
    check_run_token(run_token)
    source_db = settings.raw_database(raw.team, raw.dataset)
    target_db = settings.stage_database(raw.team, raw.dataset)
    table_cfg = table_settings or settings.table_settings(target_db, raw.table)
    partition = check_partition_columns(raw, raw_schema)
    data_columns = [check_identifier(column, "column") for column in raw_schema.column_names]
    if not data_columns:
        raise InvalidInputError(f"table {source_db}.{raw.table} has no data columns")
    bucketed_by = bucket_columns(table_cfg, data_columns, f"{source_db}.{raw.table}")

    raw_partition_location = join_location(settings.raw_root, raw.partition_prefix)
    stage_partition_root = join_location(settings.stage_root, raw.partition_prefix)
    target_location = run_location(stage_partition_root, run_token)
    if lease is not None and lease.location != target_location:
        raise InvalidInputError(f"the lease of {lease.key} writes {lease.location}, not this run's {target_location}")
    temp_table = temp_table_name(raw.table, run_token)

    lease = run_batch(lease) if lease is not None and not whole else lease
    taken = waiting_arrivals(lease) if lease is not None else []
    if taken and raw.key not in {arrival.key for arrival in taken}:
        # The arrival that started the run waits behind older ones for a follow-up: the run is known by an
        # arrival it takes (its lineage records name what it read).
        oldest = parse_raw_key(taken[0].key)
        if oldest.partition_prefix != raw.partition_prefix:
            raise InvalidInputError(f"arrival {oldest.key!r} is not in the partition {raw.partition_prefix!r}")
        raw = oldest
    ids = [arrival_id(arrival.key, arrival.sequencer) for arrival in taken]
    new = [identity for identity in ids if identity not in (lease.applied if lease else ())]
    mode, keys = _write_mode(table_cfg, lease, new)
    for key in keys:
        if not raw.holds(key):
            raise InvalidInputError(f"arrival {key!r} is not in the partition {raw.partition_prefix!r}")

    register_raw = None
    # Every run registers the raw partition (idempotent): besides adding it, this is what makes a new
    # file visible to an engine that caches a table's file listing (Spark).
    if partition:
        spec = partition_spec_sql(partition)
        register_raw = (
            f"ALTER TABLE {ddl_name(source_db, raw.table)} ADD IF NOT EXISTS PARTITION ({spec}) "
            f"LOCATION {string_literal(raw_partition_location)}"
        )
    # Under a lease, the catalog points at the committed version (or the reconcile makes it so first).
    exists = lease is not None and lease.published is not None
    publish = swap_statements(target_db, raw.table, partition, target_location, exists=exists)
    reconcile: tuple[str, ...] = ()
    if lease is not None and lease.published is not None and lease.catalog_behind:
        reconcile = swap_statements(target_db, raw.table, partition, lease.published)
    select = f"SELECT {', '.join(dml_name(c) for c in data_columns)} FROM {dml_name(source_db, raw.table)}"
    where = partition_filter(partition)
    checked: list[str] = []  # the files the type check reads: the run's new arrivals'
    source = None
    if keys:
        # The files a run reads (its batch's, or every file the partition loaded) are named in a manifest
        # that the CTAS reads through a symlink table, never in the SQL or the plan: both stay the same size
        # whatever the batch or the partition's history.
        paths = [join_location(settings.raw_root, key).rstrip("/") for key in keys]
        folder, text = manifest_object(manifest_prefix(target_location), paths)
        source = plan_source(
            raw_schema, database=target_db, temp_table=temp_table, manifest=folder, encoding=table_cfg.encoding
        )
        write_manifest(folder, text, manifests)
        select = f"SELECT {', '.join(dml_name(c) for c in data_columns)} FROM {dml_name(target_db, source.table)}"
        where = ""
        # The files of the run's new arrivals, a loaded file sent again with new content among them.
        arrived = {arrival_key(identity) for identity in new}
        checked = [path for key, path in zip(keys, paths, strict=True) if key in arrived]
    if where:
        select += f" WHERE {where}"
    # An incremental append writes the new rows as one file; everything else writes bucket_count files.
    written = table_cfg.model_copy(update={"bucket_count": 1}) if mode == "append" else table_cfg
    ctas = ctas_sql(target_db, temp_table, target_location, written, bucketed_by, select)
    applied = sorted(set(new))
    type_check = None
    if mode != "none" and checked:
        # The new files' own manifest: the CTAS's folder (by content) when the run reads only them.
        check_folder, check_text = manifest_object(manifest_prefix(target_location), checked)
        type_check = plan_type_check(
            raw_schema, database=target_db, temp_table=temp_table, manifest=check_folder, encoding=table_cfg.encoding
        )
        if type_check is not None:
            write_manifest(check_folder, check_text, manifests)
    elif mode != "none" and not keys:  # the seed's rewrite without a lease: every file in the raw folder
        type_check = plan_type_check(
            raw_schema, database=target_db, temp_table=temp_table, location=raw_partition_location
        )
    return StageAPlan(
        raw_key=raw.key,
        team=raw.team,
        dataset=raw.dataset,
        table=raw.table,
        source_database=source_db,
        target_database=target_db,
        partition=raw.partition_spec,
        run_token=run_token,
        temp_table=temp_table,
        raw_partition_location=raw_partition_location,
        stage_partition_root=stage_partition_root,
        target_location=target_location,
        bucket_count=written.bucket_count,
        register_raw=register_raw,
        ctas=ctas,
        drop_temp=f"DROP TABLE IF EXISTS {ddl_name(target_db, temp_table)}",
        publish=publish,
        mode=mode,
        applied=tuple(applied),
        carry_from=lease.published if lease and mode == "append" else None,
        reconcile=reconcile,
        type_check=type_check,
        source=source,
        lease=lease.to_dict() if lease else None,
        batch=_write_batch(lease, applied, target_location, manifests),
        quality=None
        if mode == "none"
        else QualityGate.of(
            table_cfg.checks, database=target_db, table=raw.table, temp_table=temp_table, partition=raw.partition_spec
        ),
    )


def _write_batch(
    lease: Lease | None, applied: list[str], target_location: str, writer: ManifestWriter | None
) -> BatchRef | None:
    """Write a leased run's batch into its manifest prefix (the local disk without ``writer``); where it is."""
    if lease is None:
        return None
    writer = _writer(target_location, writer, "the batch of the run writing")
    return write_batch(writer, target_location, RunBatch(lease.pending, tuple(applied)))


STILL_ARRIVING_SECONDS = 2.0
"""A partition whose newest waiting arrival was recorded less than this ago is taken to be receiving a burst (an
upload or a sync still going on, or a backlog of its arrivals still being recorded)."""
MAX_FOLLOW_UP_WINDOWS = 10
"""The most times a follow-up's router sends it back to wait another window (``follow_up_wait``): a partition that
receives a file every second for hours still runs every few minutes."""
FULL_BATCH_BYTES = MAX_RUN_ARRIVAL_BYTES * 19 // 20
"""Waiting arrivals holding this much fill a run's batch: the router records no more once ``pending`` nears
``MAX_PENDING_BYTES`` (``PartitionFull``), so a batch of long keys fills by its bytes before its count."""


def filling(pending: Collection[str], last_waiting: float, now: float, batch: int = MAX_RUN_ARRIVALS) -> bool:
    """Whether the arrivals waiting for a stage A partition's next run (``pending``, the newest recorded at
    ``last_waiting``) are still coming and do not fill a run's ``batch`` yet: that run is better started a window
    later with more of them. "Coming" is read from when the routers recorded the newest one, not from S3's event
    time: a burst the routers take minutes to record (a backlog in the queue) is still arriving as far as the
    partition's runs can tell, though every file was uploaded long before."""
    if not pending or len(pending) >= batch or sum(len(entry.encode()) for entry in pending) >= FULL_BATCH_BYTES:
        return False
    return now - last_waiting < STILL_ARRIVING_SECONDS


def follow_up_window(
    window_seconds: int, batch: int = MAX_RUN_ARRIVALS, *, clock: Callable[[], float] = time.time
) -> Callable[[Lease], int]:
    """How long the follow-up run of a stage A partition waits before it starts, from its run's end:
    ``window_seconds`` while what waits is still ``filling`` a run's ``batch``, else 0. A burst recorded more
    slowly than runs end otherwise runs as many small runs, each taking what arrived since the one before (#39:
    24 runs for 2,000 files on the local deployment); waiting lets what waits fill a batch. A partition whose
    files have all arrived starts its follow-up at once. Its router looks again when the window is over
    (``stage_a.start.follow_up_wait``)."""

    def delay(lease: Lease) -> int:
        if window_seconds <= 0:
            return 0
        return window_seconds if filling(lease.pending, lease.last_waiting, clock(), batch) else 0

    return delay
