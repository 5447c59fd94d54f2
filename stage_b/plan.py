"""Planning a stage B run: the dependency item's templated SQL steps for one destination partition.

Every ``$token`` is substituted first (the item's ``date_substitutions`` plus built-ins), and a token
left over stops the plan before anything runs. Steps run in order. A step that inserts into the target
dataset is rewritten into the same write-then-swap stage A uses, so the partition is never empty or
half-written while readers look:

- ``overwrite``: the first insert becomes a CTAS into a fresh prefix (exactly ``bucket_count`` files);
- ``append``: the same CTAS, of the new rows, next to the files the partition keeps (below);

further inserts into the target in the same run add to the fresh prefix (Athena inserts into no bucketed
table, so when more than one step writes, the first one's CTAS is not bucketed and the partition gets the
files its statements write rather than ``bucket_count``); at the end the partition is
pointed at the fresh prefix. Rows written by a step land in the destination partition. Other statements
(a scratch table, a DELETE elsewhere) run as written.

Planned under the partition's lease (``lakeline.commits``), one run takes the messages waiting for the
partition, a bounded batch of them oldest first (``MAX_RUN_MESSAGES``; the rest wait for the follow-up run),
and the messages' ids are committed with the new version, so no message is applied twice, whatever is
redelivered or overlaps. ``overwrite`` messages coalesce into one rebuild. An
``append`` run takes the messages of one *contribution* (``StageBMessage.contribution_key``: the
partition that triggered it, or for ``triggerMode: all`` the set of sources) and leaves the others
waiting for its follow-up run: it writes the steps' rows alone into its prefix, and the published
version's files are carried in, except those the same contribution wrote before. So a contribution
applied again (a late file, a re-sent one) replaces its own rows, and the others stay as they are.
Unleased (``lakeline stage-b``), each append message adds the steps' rows to the partition's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from lakeline.commits import Lease
from lakeline.commits.batch import bounded_batch
from lakeline.dependencies.model import MAX_PLAN_BYTES, DependencyItem, plan_size_problem, worst_case_plan_bytes
from lakeline.dependencies.resolve import SqlFileReader, resolve_steps
from lakeline.dependencies.tokens import builtin_token_values
from lakeline.engines.base import Column, TableSchema
from lakeline.errors import InvalidInputError
from lakeline.names import check_identifier, check_qualified_table, dml_name
from lakeline.partitions import (
    bucket_columns,
    check_run_location,
    check_run_token,
    ctas_sql,
    partition_filter,
    partition_prefix,
    run_location,
    swap_statements,
    temp_table_name,
    validated_plan,
)
from lakeline.quality.gate import QualityGate
from lakeline.settings import PipelineSettings
from lakeline.storage import join_location, table_root_of
from stage_b.messages import StageBMessage


@dataclass(frozen=True)
class PlannedStep:
    index: int
    info: str
    db: str
    sql: str
    writes_target: bool


@dataclass(frozen=True)
class StageBPlan:
    message: dict[str, Any]
    message_id: str
    target_database: str
    target_table: str
    partition: dict[str, str]
    usage: str
    run_token: str
    partition_root: str
    target_location: str
    temp_table: str
    steps: tuple[PlannedStep, ...]
    drop_temp: str | None
    publish: tuple[str, ...]
    resolved_sql: tuple[str, ...] = field(default=())
    message_ids: tuple[str, ...] = ()  # the messages this run takes (under a lease)
    applied: tuple[str, ...] = ()  # the ids of the messages this run applies (committed with it)
    reconcile: tuple[str, ...] = ()  # point the partition at its committed version before reading it
    lease: dict[str, Any] | None = field(default=None, compare=False)
    # A leased append writes one contribution's rows (``contribution``, its key) into its prefix and
    # carries the published files over (``carry_from``), leaving the ones that contribution had before
    # (``replaces``): a contribution applied again replaces its rows instead of adding them twice.
    contribution: str | None = None
    carry_from: str | None = None
    replaces: tuple[str, ...] = ()
    quality: QualityGate | None = None  # the target's checks (its item's), run before the commit (#41)

    @property
    def dataset(self) -> str:
        return f"{self.target_database}.{self.target_table}"

    @property
    def writes(self) -> bool:
        return any(step.writes_target for step in self.steps)

    @property
    def table_root(self) -> str:
        """The target table's location in the catalog: the run deletes only run prefixes under it."""
        return table_root_of(self.partition_root, self.partition)

    @property
    def statements(self) -> list[str]:
        """Every statement in order; the DROP runs whether or not the steps succeed."""
        tail = [self.drop_temp] if self.drop_temp else []
        return [*self.reconcile, *(step.sql for step in self.steps), *tail, *self.publish]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["steps"] = [asdict(step) for step in self.steps]
        for name in ("publish", "resolved_sql", "message_ids", "applied", "reconcile", "replaces"):
            data[name] = list(getattr(self, name))
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StageBPlan:
        plan = validated_plan(cls, data, "stage B plan")
        check_run_location(plan.target_location, plan.partition_root, plan.run_token, "stage B plan")
        return plan


def _hive_type_to_athena(kind: str) -> str:
    try:
        return exp.DataType.build(kind, dialect="hive").sql("athena")
    except (ParseError, ValueError) as error:
        raise InvalidInputError(f"column type {kind!r} is not understood: {error}") from error


def _insert_target(statement: exp.Expr, default_db: str) -> tuple[str, list[str] | None] | None:
    """``(db.table, [columns] or None)`` if ``statement`` is an INSERT INTO, else ``None``."""
    if not isinstance(statement, exp.Insert) or statement.args.get("overwrite"):
        return None
    target = statement.this
    columns: list[str] | None = None
    if isinstance(target, exp.Schema):
        columns = [column.name.lower() for column in target.expressions]
        target = target.this
    if not isinstance(target, exp.Table):
        return None
    database = (target.db or default_db).lower()
    return f"{database}.{target.name.lower()}", columns


def _rows_sql(query: exp.Expr, target_columns: list[Column], data_columns: list[Column], listed: list[str]) -> str:
    """The step's rows as the target's data columns (cast to their types), partition columns dropped."""
    known = {column.name for column in target_columns}
    unknown = [name for name in listed if name not in known]
    if unknown:
        raise InvalidInputError(f"INSERT names columns {unknown} that the target table does not have")
    projections = []
    for column in data_columns:
        kind = _hive_type_to_athena(column.type)
        source = dml_name(column.name) if column.name in listed else "NULL"
        projections.append(f"CAST({source} AS {kind}) AS {dml_name(column.name)}")
    aliases = ", ".join(dml_name(name) for name in listed)
    return f"SELECT {', '.join(projections)} FROM ({query.sql('athena')}) AS lakeline_step({aliases})"


def _step_statement(index: int, sql: str, what: str) -> exp.Expr:
    """The one statement of step ``index`` (``what``: its info or db, for the error)."""
    label = f"steps[{index}] ({what})"
    try:
        statements = [s for s in sqlglot.parse(sql, read="athena") if s is not None]
    except ParseError as error:
        raise InvalidInputError(f"{label}: SQL does not parse: {error}") from error
    if len(statements) != 1:
        raise InvalidInputError(f"{label}: a step holds exactly one statement, found {len(statements)}")
    return statements[0]


MAX_RUN_MESSAGES = 100
"""The most messages one run takes: the rest wait for the follow-up run (``lakeline.commits.batch``)."""
MAX_RUN_MESSAGE_BYTES = 40 * 1024
"""The most bytes the messages one run takes may cost its input, each counted as its body in the lease's
``pending`` and its id twice (``message_ids``, ``applied``): with the rest of the plan, under a quarter of Step
Functions' 256 KiB whatever waits (``tests/scale``)."""


def _message_cost(message: StageBMessage) -> int:
    return len(message.model_dump_json().encode()) + 2 * len(message.deduplication_id())


def leased_messages(lease: Lease) -> list[StageBMessage]:
    """The messages waiting in a lease, oldest trigger first."""
    messages = [StageBMessage.model_validate_json(body) for body in lease.pending]
    return sorted(messages, key=lambda message: (message.trigger.run or "", message.deduplication_id()))


def plan_stage_b(
    message: StageBMessage,
    item: DependencyItem,
    target: TableSchema,
    settings: PipelineSettings,
    read_sql_file: SqlFileReader,
    *,
    run_token: str,
    lease: Lease | None = None,
) -> StageBPlan:
    """The plan of one run for ``message``'s target partition. Under a lease (``run_token`` is its
    owner) the run takes the lease's messages instead: every one not yet applied."""
    check_run_token(run_token)
    taken = [message]
    left: set[str] = set()  # the ids of waiting messages left for the follow-up run
    if lease is not None:
        waiting = leased_messages(lease)
        batch = bounded_batch(waiting, _message_cost, max_items=MAX_RUN_MESSAGES, max_bytes=MAX_RUN_MESSAGE_BYTES)
        left = {m.deduplication_id() for m in waiting[len(batch) :]}
        taken = [m for m in batch if m.deduplication_id() not in lease.applied]
        if taken and all(m.usage == "append" for m in taken):
            # One contribution per append run, so that each one's rows are files of their own.
            first = taken[0].contribution_key()
            left |= {m.deduplication_id() for m in taken if m.contribution_key() != first}
            taken = [m for m in taken if m.contribution_key() == first]
        if taken:
            message = taken[0]
        elif waiting:
            message = waiting[0]
    if item.dataset != message.target_dataset:
        raise InvalidInputError(f"message targets {message.target_dataset} but the item is for {item.dataset}")
    database, table = check_qualified_table(message.target_dataset, "target dataset")
    if sorted(message.partition) != sorted(target.partition_names):
        raise InvalidInputError(
            f"{message.target_dataset} is partitioned by {target.partition_names}, "
            f"the message names {sorted(message.partition)}"
        )
    if not target.location:
        raise InvalidInputError(f"{message.target_dataset} has no location in the catalog")
    partition = [(column, message.partition[column.name]) for column in target.partition_columns]
    data_columns = list(target.columns)
    data_names = [check_identifier(column.name, "column") for column in data_columns]
    table_cfg = settings.table_settings(database, table)
    bucketed_by = bucket_columns(table_cfg, data_names, message.target_dataset)
    partition_root = join_location(target.location, partition_prefix(partition))
    location = run_location(partition_root, run_token)
    if lease is not None and lease.location != location:
        raise InvalidInputError(f"the lease of {lease.key} writes {lease.location}, not this run's {location}")
    temp = temp_table_name(table, run_token)
    reconcile: tuple[str, ...] = ()
    if lease is not None and lease.published is not None and lease.catalog_behind:
        reconcile = swap_statements(database, table, partition, lease.published)
    exists = lease is not None and lease.published is not None
    applied = sorted({m.deduplication_id() for m in taken}) if lease else []
    # Overwrite messages coalesce into one rebuild, which also covers appends taken with them (the
    # rebuild reads every source as it is now). Unleased, each append message adds its rows once.
    usage = "append" if all(m.usage == "append" for m in taken) else "overwrite"
    copies = len(taken) if usage == "append" and lease is None else 1
    contribution = message.contribution_key() if usage == "append" and lease is not None and taken else None
    carry_from = lease.published if lease is not None and contribution else None
    replaces = lease.contribution_files(contribution) if lease is not None and contribution else ()

    builtins = builtin_token_values(
        item.dataset, item.partition_column, message.partition.get(item.partition_column), settings.environment or ""
    )
    resolved = resolve_steps(item, message.partition, read_sql_file, extra_values=builtins)
    # The item's inline SQL was measured when it was put; ``sql_file`` steps are known only now.
    size = worst_case_plan_bytes(item, [step.sql for step in resolved.steps])
    if size > MAX_PLAN_BYTES:
        raise InvalidInputError(f"dependency item {item.dataset!r}: {plan_size_problem(size)}")
    planned = resolved.steps if taken else ()
    parsed = [_step_statement(index, step.sql, step.info or step.db) for index, step in enumerate(planned)]
    inserts = [_insert_target(statement, step.db) for statement, step in zip(parsed, planned, strict=True)]
    writers = sum(1 for insert in inserts if insert is not None and insert[0] == message.target_dataset)
    # Athena refuses INSERT INTO a bucketed table: when several steps write, the first one's CTAS is not
    # bucketed, so that the later ones can insert into it (in step order, as written).
    bucketing = bucketed_by if writers == 1 else []
    steps: list[PlannedStep] = []
    wrote = False
    for index, step in enumerate(planned):
        statement, insert = parsed[index], inserts[index]
        if insert is None or insert[0] != message.target_dataset:
            steps.append(PlannedStep(index, step.info, step.db, step.sql, writes_target=False))
            continue
        all_columns = [*data_columns, *target.partition_columns]
        listed = insert[1] or [column.name for column in all_columns]
        step_rows = _rows_sql(statement.expression, all_columns, data_columns, listed)
        rows = step_rows
        for _ in range(copies - 1):
            rows = f"{rows} UNION ALL {step_rows}"
        if wrote:
            sql = f"INSERT INTO {dml_name(database, temp)} {rows}"
        else:
            if usage == "append" and lease is None:
                current = f"SELECT {', '.join(dml_name(c) for c in data_names)} FROM {dml_name(database, table)}"
                where = partition_filter(partition)
                rows = f"{current}{f' WHERE {where}' if where else ''} UNION ALL {rows}"
            sql = ctas_sql(database, temp, location, table_cfg, bucketing, rows)
            wrote = True
        steps.append(PlannedStep(index, step.info, step.db, sql, writes_target=True))

    return StageBPlan(
        message=message.model_dump(mode="json"),
        message_id=message.deduplication_id(),
        target_database=database,
        target_table=table,
        partition=dict(message.partition),
        usage=usage,
        run_token=run_token,
        partition_root=partition_root,
        target_location=location,
        temp_table=temp,
        steps=tuple(steps),
        drop_temp=f"DROP TABLE IF EXISTS `{database}`.`{temp}`" if wrote else None,
        publish=swap_statements(database, table, partition, location, exists=exists) if wrote else (),
        resolved_sql=tuple(step.sql for step in resolved.steps) if taken else (),
        message_ids=tuple(m.deduplication_id() for m in taken),
        applied=tuple(applied),
        reconcile=reconcile,
        lease=_taking(lease, left),
        contribution=contribution if wrote else None,
        carry_from=carry_from if wrote else None,
        replaces=replaces if wrote else (),
        quality=QualityGate.of(
            item.checks, database=database, table=table, temp_table=temp, partition=message.partition
        )
        if wrote
        else None,
    )


def _gate(item: DependencyItem, database: str, table: str, temp: str, partition: dict[str, str]) -> QualityGate | None:
    return QualityGate.of(item.checks, database=database, table=table, temp_table=temp, partition=partition)


def _taking(lease: Lease | None, left: set[str]) -> dict[str, Any] | None:
    """The lease as the run passes it on: its ``pending`` is what the run takes out of the partition's
    queue, so the messages ``left`` (by id) stay there for the follow-up run."""
    if lease is None:
        return None
    data = lease.to_dict()
    if left:
        data["pending"] = [
            body for body in lease.pending if StageBMessage.model_validate_json(body).deduplication_id() not in left
        ]
    return data


class ItemSource(Protocol):
    def get_item(self, dataset: str) -> DependencyItem | None: ...


class TableSource(Protocol):
    def describe_table(self, database: str, table: str) -> TableSchema: ...


@dataclass(frozen=True)
class PlanSources:
    """Where planning reads from, the same way for the deployed router and the local runtime: the
    dependency items, the catalog, the pipeline's settings, and ``sql_files``: the reader of a team's
    ``sql_file`` steps (the artifacts bucket deployed, the project's queries folder locally)."""

    items: ItemSource
    catalog: TableSource
    settings: PipelineSettings
    sql_files: Callable[[str], SqlFileReader]


def team_of(database: str) -> str:
    """The team owning a database (``<team>_<dataset>...``): its first word."""
    return database.split("_", 1)[0]


def plan_message(message: StageBMessage, sources: PlanSources, run_token: str, lease: Lease | None) -> StageBPlan:
    """The plan of ``message``'s run, from its target's dependency item and catalog table."""
    item = sources.items.get_item(message.target_dataset)
    if item is None:
        raise InvalidInputError(f"no dependency item for {message.target_dataset}")
    database, table = message.target_dataset.split(".")
    schema = sources.catalog.describe_table(database, table)
    reader = sources.sql_files(team_of(database))
    return plan_stage_b(message, item, schema, sources.settings, reader, run_token=run_token, lease=lease)
