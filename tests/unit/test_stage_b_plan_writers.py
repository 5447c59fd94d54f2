"""How a stage B plan writes its target when one step or several do (#36): Athena refuses INSERT INTO
a bucketed table, so a second writing step must not insert into the bucketed CTAS of the first."""

from __future__ import annotations

from typing import Any

import pytest

from lakeline.dependencies.model import parse_dependency_item
from lakeline.engines.base import Column, TableSchema
from lakeline.settings import PipelineSettings
from stage_b.messages import StageBMessage
from stage_b.plan import StageBPlan, plan_stage_b
from tests.rehearsal.support import daily_item

TARGET = "shop_reports_dev.summary"
SCHEMA = TableSchema(
    "shop_reports_dev",
    "summary",
    (Column("measure", "string"), Column("amount", "double")),
    (Column("date", "string"),),
    location="s3://analytics/summary/",
)
SETTINGS = PipelineSettings(raw_root="s3://raw/", stage_root="s3://stage/", environment="dev")
ORDERS = "INSERT INTO shop_reports_dev.summary SELECT 'orders', count(*), '$day' FROM orders"
REVENUE = "INSERT INTO shop_reports_dev.summary SELECT 'revenue', sum(amount), '$day' FROM orders"
SCRATCH = "CREATE TABLE shop_pos_dev.scratch AS SELECT * FROM orders"


def plan(*sqls: str) -> StageBPlan:
    steps: list[dict[str, Any]] = [{"db": "shop_pos_dev", "info": f"step {i}", "sql": s} for i, s in enumerate(sqls)]
    data = daily_item(TARGET, "overwrite", steps, source="shop_pos_dev.orders")
    item = parse_dependency_item({**data, "scratchTables": ["shop_pos_dev.scratch"]})
    message = StageBMessage.model_validate(
        {
            "target_dataset": TARGET,
            "partition": {"date": "20240301"},
            "trigger": {"table": "shop_pos_dev.orders", "partition": {"date": "20240301"}},
            "usage": "overwrite",
        }
    )
    return plan_stage_b(message, item, SCHEMA, SETTINGS, lambda name: "", run_token="20240301t000000000000_0123456789")


def test_one_writing_step_is_a_bucketed_ctas() -> None:
    (step,) = plan(ORDERS).steps
    assert step.sql.startswith("CREATE TABLE") and "bucketed_by = ARRAY['measure'], bucket_count = 1" in step.sql


@pytest.mark.parametrize("middle", [(), (SCRATCH,)], ids=["adjacent", "a step between"])
def test_several_writing_steps_insert_in_order_into_a_ctas_that_is_not_bucketed(middle: tuple[str, ...]) -> None:
    """Each step keeps its place (a step between may make what a later one reads) and its own run events."""
    steps = plan(ORDERS, *middle, REVENUE).steps
    first, *between, last = steps
    assert [step.writes_target for step in steps] == [True, *(False for _ in middle), True]
    assert first.sql.startswith("CREATE TABLE") and "bucket" not in first.sql
    assert last.sql.startswith('INSERT INTO "shop_reports_dev"."lakeline_tmp_summary_') and "revenue" in last.sql
    assert [step.sql for step in between] == list(middle)
