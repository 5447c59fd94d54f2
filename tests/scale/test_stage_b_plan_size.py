"""A stage B plan's size (#41 review): its steps' SQL travels twice (as run, rewritten into the run's temp table, and
as resolved, for the lineage events) and its checks once, so an item with long SQL and full checks could pass Step
Functions' 256 KiB input, refused at every ``StartExecution``. The worst case is measured here, and an item past
``MAX_PLAN_BYTES`` is refused where it is validated (``lakeline deps put``, the stream function: the item model) or,
for ``sql_file`` steps read only when a run is planned, by the router's planning."""

from __future__ import annotations

import json

import pytest

from lakeline.dependencies.model import (
    MAX_PLAN_BYTES,
    DependencyItemError,
    parse_dependency_item,
    worst_case_plan_bytes,
)
from lakeline.errors import InvalidInputError
from lakeline.quality.checks import MAX_CHECKS, MAX_CHECKS_BYTES
from stage_b.plan import StageBPlan, leased_messages, plan_stage_b
from tests.rehearsal.support import daily_item
from tests.scale.test_stage_b_batches import OWNER, SCHEMA, SETTINGS, SOURCE, TARGET, backlog

QUOTA = 256 * 1024


def sql_of(size: int) -> str:
    """An INSERT of the target of about ``size`` bytes, quoted at every other character (JSON escapes them again)."""
    head = f"INSERT INTO {TARGET} SELECT region, sum(amount), '$day' FROM {SOURCE} WHERE date = '$day' AND region IN ("
    values = []
    while len(head) + sum(len(value) + 2 for value in values) < size:
        values.append(f'"r{len(values):05d}"')
    return head + ", ".join(values) + ") GROUP BY region"


def full_checks() -> list[dict[str, str]]:
    """A target's most checks: 100 rules, about 64,000 bytes, quoted at every other character."""
    values = ", ".join(f'"{n:x}"' for n in range(104))
    rules = [{"rule": f'ColumnValues "c{n:02d}" in [{values}]'} for n in range(MAX_CHECKS)]
    assert MAX_CHECKS_BYTES - 1_000 <= sum(len(rule["rule"]) for rule in rules) <= MAX_CHECKS_BYTES
    return rules


def item_data(sql: str = "", sql_file: str = "") -> dict[str, object]:
    data = daily_item(TARGET, "overwrite", [{"db": "x", "sql": sql, "sql_file": sql_file}], source=SOURCE)
    data["checks"] = full_checks()
    return data


def input_bytes(plan: StageBPlan) -> int:
    """The state machine input ``stage_b.start.start_plan`` sends."""
    return len(json.dumps({"message": plan.message, "plan": plan.to_dict()}).encode())


def largest_sql_accepted() -> str:
    """The longest SQL of the shape above an item with full checks is accepted with (to 1 KB)."""
    low, high = 1_000, 200_000
    while high - low > 1_000:
        middle = (low + high) // 2
        size = worst_case_plan_bytes(parse_dependency_item(item_data(sql_of(1_000))), [sql_of(middle)])
        low, high = (middle, high) if size <= MAX_PLAN_BYTES else (low, middle)
    return sql_of(low)


def test_the_largest_plan_accepted_with_a_full_batch_stays_under_the_quota() -> None:
    sql = largest_sql_accepted()
    item = parse_dependency_item(item_data(sql))
    lease = backlog(2_000)
    first = leased_messages(lease)[0]
    plan = plan_stage_b(first, item, SCHEMA, SETTINGS, lambda name: "", run_token=OWNER, lease=lease)
    unleased = plan_stage_b(first, item, SCHEMA, SETTINGS, lambda name: "", run_token=OWNER)
    assert input_bytes(unleased) <= worst_case_plan_bytes(item) <= MAX_PLAN_BYTES  # the estimate bounds the plan
    assert input_bytes(plan) > 3 * QUOTA // 4  # a real worst case: the SQL twice, the checks, a full batch
    assert input_bytes(plan) < QUOTA - 16 * 1024, input_bytes(plan)  # room for what the state machine adds


def test_an_item_whose_plan_would_pass_the_bound_is_refused_naming_the_sizes() -> None:
    """~60 KB of SQL with full checks: about 248,000 bytes of plan before its batch, 290,000 with a full one."""
    with pytest.raises(DependencyItemError) as refused:
        parse_dependency_item(item_data(sql_of(60_000)), f"dependency item {TARGET!r}")  # as the stream function
    (problem,) = [problem for problem in refused.value.problems if "plan would take" in problem]
    assert problem.startswith("steps: a run's plan would take up to ") and f"over the {MAX_PLAN_BYTES:,}" in problem
    assert str(refused.value).startswith(f"dependency item {TARGET!r} is invalid")


def test_sql_files_are_measured_when_the_run_is_planned() -> None:
    """A ``sql_file`` step's SQL is read only by the router: the item is accepted, its plan refused."""
    item = parse_dependency_item(item_data(sql_file="daily.sql"))
    lease = backlog(1)
    with pytest.raises(InvalidInputError, match=r"plan would take up to [\d,]+ bytes .* over the 196,608"):
        plan_stage_b(leased_messages(lease)[0], item, SCHEMA, SETTINGS, lambda name: sql_of(60_000), run_token=OWNER)
    small = plan_stage_b(leased_messages(lease)[0], item, SCHEMA, SETTINGS, lambda name: sql_of(1_000), run_token=OWNER)
    assert input_bytes(small) < MAX_PLAN_BYTES
