from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lakeline.engines.base import Column, TableSchema
from lakeline.errors import InvalidInputError
from lakeline.settings import PipelineSettings, TableSettings
from stage_a.keys import parse_raw_key
from stage_a.plan import StageAPlan, new_run_token, plan_stage_a

TOKEN = "20220120t101500000000_0123456789"
SETTINGS = PipelineSettings(raw_root="s3://raw-bucket/", stage_root="s3://stage-bucket/", environment="dev")


def schema(*partitions: tuple[str, str]) -> TableSchema:
    return TableSchema(
        "engineering_mysql_raw_dev",
        "customers",
        (Column("customer_id", "bigint"), Column("name", "string")),
        tuple(Column(name, kind) for name, kind in partitions),
    )


def test_partitioned_plan_runs_register_ctas_drop_and_swap_in_order() -> None:
    raw = parse_raw_key("engineering/mysql/customers/date=20220120/file.csv")
    plan = plan_stage_a(raw, SETTINGS, schema(("date", "string")), run_token=TOKEN)
    assert plan.source_database == "engineering_mysql_raw_dev"
    assert plan.target_database == "engineering_mysql_dev"
    target = f"s3://stage-bucket/engineering/mysql/customers/date=20220120/lakeline_run={TOKEN}/"
    assert plan.target_location == target
    temp = f"lakeline_tmp_customers_{TOKEN}"
    assert plan.statements == [
        "ALTER TABLE `engineering_mysql_raw_dev`.`customers` ADD IF NOT EXISTS PARTITION (`date`='20220120') "
        "LOCATION 's3://raw-bucket/engineering/mysql/customers/date=20220120/'",
        # A CSV table's values are type-checked before the CTAS (stage_a.type_check, #39).
        f"CREATE EXTERNAL TABLE `engineering_mysql_dev`.`{temp}_text` (`customer_id` STRING, `name` STRING) "
        "ROW FORMAT SERDE 'org.apache.hadoop.hive.serde2.OpenCSVSerde' WITH SERDEPROPERTIES ('separatorChar' = ',', "
        "'quoteChar' = '\"') STORED AS TEXTFILE LOCATION 's3://raw-bucket/engineering/mysql/customers/date=20220120/' "
        "TBLPROPERTIES ('skip.header.line.count' = '1')",
        plan.type_check.check if plan.type_check else "",
        f"DROP TABLE IF EXISTS `engineering_mysql_dev`.`{temp}_text`",
        f'CREATE TABLE "engineering_mysql_dev"."{temp}" WITH (format = \'PARQUET\', '
        f"external_location = '{target}', bucketed_by = ARRAY['customer_id'], bucket_count = 1, "
        "write_compression = 'SNAPPY') "
        'AS SELECT "customer_id", "name" FROM "engineering_mysql_raw_dev"."customers" WHERE "date" = \'20220120\'',
        f"DROP TABLE IF EXISTS `engineering_mysql_dev`.`{temp}`",
        "ALTER TABLE `engineering_mysql_dev`.`customers` ADD IF NOT EXISTS PARTITION (`date`='20220120') "
        f"LOCATION '{target}'",
        f"ALTER TABLE `engineering_mysql_dev`.`customers` PARTITION (`date`='20220120') SET LOCATION '{target}'",
    ]


def test_no_statement_deletes_data_before_the_new_partition_is_in_place() -> None:
    raw = parse_raw_key("engineering/mysql/customers/date=20220120/file.csv")
    plan = plan_stage_a(raw, SETTINGS, schema(("date", "string")), run_token=TOKEN)
    assert not any(word in s.upper() for s in plan.statements for word in ("DELETE", "TRUNCATE", "INSERT OVERWRITE"))


def test_unpartitioned_table_swaps_the_table_location() -> None:
    raw = parse_raw_key("engineering/mysql/customers/file.csv")
    plan = plan_stage_a(raw, SETTINGS, schema(), run_token=TOKEN)
    assert plan.register_raw is None
    assert "WHERE" not in plan.ctas
    assert plan.publish == (
        "ALTER TABLE `engineering_mysql_dev`.`customers` SET LOCATION "
        f"'s3://stage-bucket/engineering/mysql/customers/lakeline_run={TOKEN}/'",
    )


def test_table_settings_choose_format_compression_and_buckets() -> None:
    raw = parse_raw_key("engineering/mysql/customers/date=20220120/file.csv")
    custom = TableSettings(format="ORC", compression="zlib", bucketed_by=("name",), bucket_count=4)
    settings = SETTINGS.model_copy(update={"tables": {"engineering_mysql_dev.customers": custom}})
    plan = plan_stage_a(raw, settings, schema(("date", "string")), run_token=TOKEN)
    assert "format = 'ORC'" in plan.ctas
    assert "write_compression = 'ZLIB'" in plan.ctas
    assert "bucketed_by = ARRAY['name'], bucket_count = 4" in plan.ctas
    assert plan.bucket_count == 4


def test_integer_and_date_partitions_get_typed_literals() -> None:
    raw = parse_raw_key("engineering/mysql/customers/year=2022/day=2022-01-20/file.csv")
    plan = plan_stage_a(raw, SETTINGS, schema(("year", "int"), ("day", "date")), run_token=TOKEN)
    assert 'WHERE "year" = 2022 AND "day" = DATE \'2022-01-20\'' in plan.ctas


@pytest.mark.parametrize(
    ("key", "partitions", "message"),
    [
        ("engineering/mysql/customers/dt=20220120/f.csv", [("date", "string")], r"partitioned by \['date'\]"),
        ("engineering/mysql/customers/f.csv", [("date", "string")], r"partitioned by \['date'\]"),
        ("engineering/mysql/customers/year=20x2/f.csv", [("year", "int")], "not an integer"),
        ("engineering/mysql/customers/day=20220120/f.csv", [("day", "date")], "not a date"),
        ("engineering/mysql/customers/day=1/f.csv", [("day", "map<string,string>")], "unsupported type"),
    ],
)
def test_key_that_does_not_fit_the_table_is_rejected(key: str, partitions: list[tuple[str, str]], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        plan_stage_a(parse_raw_key(key), SETTINGS, schema(*partitions), run_token=TOKEN)


def test_unknown_bucket_column_is_rejected() -> None:
    raw = parse_raw_key("engineering/mysql/customers/f.csv")
    settings = SETTINGS.model_copy(update={"default_table": TableSettings(bucketed_by=("nope",))})
    with pytest.raises(InvalidInputError, match=r"bucket columns \['nope'\]"):
        plan_stage_a(raw, settings, schema(), run_token=TOKEN)


def test_run_tokens_sort_by_time_and_may_be_deterministic() -> None:
    early = new_run_token(datetime(2022, 1, 20, 10, 0, tzinfo=UTC))
    late = new_run_token(datetime(2022, 1, 20, 10, 0, 1, tzinfo=UTC))
    assert early < late
    fixed = datetime(2022, 1, 20, tzinfo=UTC)
    assert new_run_token(fixed, "execution-1") == new_run_token(fixed, "execution-1")
    assert new_run_token(fixed, "execution-1") != new_run_token(fixed, "execution-2")


def test_malformed_run_token_is_rejected() -> None:
    raw = parse_raw_key("engineering/mysql/customers/f.csv")
    with pytest.raises(InvalidInputError, match="run token"):
        plan_stage_a(raw, SETTINGS, schema(), run_token="x'; DROP TABLE y; --")


def test_a_plan_of_the_version_before_with_its_copies_is_still_read() -> None:
    raw = parse_raw_key("engineering/mysql/customers/date=20220120/file.csv")
    plan = plan_stage_a(raw, SETTINGS, schema(("date", "string")), run_token=TOKEN)
    earlier = {**plan.to_dict(), "arrivals": [], "statements": plan.statements}  # in flight across an upgrade

    assert StageAPlan.from_dict(earlier) == plan


@pytest.mark.parametrize(
    ("key", "held"),
    [
        ("sales/pos/orders/date=20240301/b.csv", True),
        ("sales/pos/orders/date=20240302/a.csv", False),  # another partition
        ("sales/pos/orders/date=20240301/hour=1/a.csv", False),  # a deeper one
        ("sales/pos/orders/date=202403011/a.csv", False),  # a value that starts alike
        ("sales/pos/orders_old/date=20240301/a.csv", False),
    ],
)
def test_a_raw_object_holds_the_files_of_its_partition_only(key: str, held: bool) -> None:
    assert parse_raw_key("sales/pos/orders/date=20240301/a.csv").holds(key) is held
