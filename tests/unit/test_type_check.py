"""The SQL of stage A's type check in the engine (#39): which runs get one, which files it reads, and that
its statements are Athena (Trino) SQL of a bounded size."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
import sqlglot

from lakeline.commits import Lease
from lakeline.engines.base import Column, TableSchema
from lakeline.settings import PipelineSettings
from stage_a.arrivals import Arrival
from stage_a.keys import parse_raw_key
from stage_a.plan import StageAPlan, plan_stage_a
from stage_a.type_check import plan_type_check, refusal

TOKEN = "20220120t101500000000_0123456789"
SETTINGS = PipelineSettings(raw_root="s3://raw-bucket/", stage_root="s3://stage-bucket/", environment="dev")
PARTITION = "s3://raw-bucket/shop/pos/sales/day=1/"


def table(*columns: tuple[str, str], fmt: str | None = "csv") -> TableSchema:
    return TableSchema(
        "shop_pos_raw_dev",
        "sales",
        tuple(Column(name, kind) for name, kind in columns),
        (Column("day", "string"),),
        format=fmt,
    )


SALES = table(("sale_id", "bigint"), ("store", "string"), ("amount", "decimal(10,2)"), ("day_sold", "date"))


def check_of(schema: TableSchema) -> str:
    check = plan_type_check(
        schema,
        database="shop_pos_dev",
        temp_table="lakeline_tmp_sales_t",
        location=PARTITION,
    )
    assert check is not None
    return check.check


@pytest.mark.parametrize("fmt", ["parquet", "orc"])
def test_typed_formats_have_no_check(fmt: str) -> None:
    assert (
        plan_type_check(
            SALES.__class__(**{**SALES.__dict__, "format": fmt}),
            database="d",
            temp_table="t",
            location=PARTITION,
        )
        is None
    )


def test_a_table_of_strings_has_no_check() -> None:
    strings = table(("store", "string"), ("city", "varchar(10)"))
    assert plan_type_check(strings, database="d", temp_table="t", location=PARTITION) is None


def test_the_text_table_reads_the_raw_partition_as_strings_in_the_raw_tables_format() -> None:
    semicolons = TableSchema(**{**SALES.__dict__, "delimiter": ";"})
    check = plan_type_check(semicolons, database="shop_pos_dev", temp_table="lakeline_tmp_sales_t", location=PARTITION)
    assert check is not None
    assert check.create == (
        "CREATE EXTERNAL TABLE `shop_pos_dev`.`lakeline_tmp_sales_t_text` (`sale_id` STRING, `store` STRING, "
        "`amount` STRING, `day_sold` STRING) ROW FORMAT SERDE 'org.apache.hadoop.hive.serde2.OpenCSVSerde' "
        "WITH SERDEPROPERTIES ('separatorChar' = ';', 'quoteChar' = '\"') STORED AS TEXTFILE "
        f"LOCATION '{PARTITION}' TBLPROPERTIES ('skip.header.line.count' = '1')"
    )
    assert check.drop == "DROP TABLE IF EXISTS `shop_pos_dev`.`lakeline_tmp_sales_t_text`"
    unquoted = TableSchema(**{**SALES.__dict__, "quote": ""})
    made = plan_type_check(unquoted, database="d", temp_table="t", location=PARTITION)
    assert made is not None and "ROW FORMAT DELIMITED FIELDS TERMINATED BY ','" in made.create


def test_the_check_is_one_trino_statement_checking_only_typed_columns() -> None:
    sql = check_of(SALES)
    (parsed,) = sqlglot.parse(sql, read="trino")
    assert isinstance(parsed, sqlglot.exp.Select)
    assert 'try_cast(trim("sale_id") AS BIGINT)' in sql and 'try_cast(trim("amount") AS DECIMAL(10,2))' in sql
    assert 'try_cast(trim("store")' not in sql  # any text is a string
    assert sql.endswith("LIMIT 1")
    assert '$path" IN' not in sql  # the files are the text table's (a manifest or a folder), never listed
    assert "\\" not in sql  # a backslash is an escape in Spark's literals, a character in Trino's


def test_a_text_table_over_a_manifest_reads_the_listed_files_as_strings_through_symlinks() -> None:
    manifest = "s3://stage-bucket/shop/pos/sales/day=1/lakeline_run=x/0123456789abcdef/"
    check = plan_type_check(SALES, database="shop_pos_dev", temp_table="lakeline_tmp_sales_t", manifest=manifest)
    assert check is not None and not check.spark_ddl
    assert check.create == (
        "CREATE EXTERNAL TABLE `shop_pos_dev`.`lakeline_tmp_sales_t_text` (`sale_id` STRING, `store` STRING, "
        "`amount` STRING, `day_sold` STRING) ROW FORMAT SERDE 'org.apache.hadoop.hive.serde2.OpenCSVSerde' "
        "WITH SERDEPROPERTIES ('separatorChar' = ',', 'quoteChar' = '\"') STORED AS INPUTFORMAT "
        "'org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat' OUTPUTFORMAT "
        f"'org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat' LOCATION '{manifest}' "
        "TBLPROPERTIES ('skip.header.line.count' = '1')"
    )
    assert check.check == check_of(SALES)  # the same check, whatever the files are read through


def test_the_check_grows_by_one_condition_per_column_and_stays_far_under_64_kib() -> None:
    wide = table(*[(f"c{n}", "bigint") for n in range(300)])
    assert len(check_of(wide).encode()) < 64 * 1024


def test_refusal_words_the_returned_group() -> None:
    assert refusal([]) is None
    assert refusal([("s3://b/k/a.csv", "amount (double)", "x | y", None)]) == (
        "lakeline type check: s3://b/k/a.csv, column amount (double) has values not of its type: x | y"
    )


def arrival(key: str, sequencer: str) -> Arrival:
    return Arrival(bucket="raw-bucket", key=key, sequencer=sequencer, event_time=datetime(2022, 1, 20, tzinfo=UTC))


class Written(dict[str, str]):
    """The manifests a plan writes (``ManifestWriter``), by location."""

    def write_text(self, location: str, text: str) -> None:
        self[location] = text

    def read_text(self, location: str) -> str:
        return self[location]


def leased_plan(
    applied: list[str], pending: list[Arrival], published: str | None, written: Written | None = None
) -> StageAPlan:
    raw = parse_raw_key("shop/pos/sales/day=1/b.csv")
    location = f"s3://stage-bucket/shop/pos/sales/day=1/lakeline_run={TOKEN}/"
    lease = Lease(
        key="shop_pos_dev.sales/day=1",
        owner=TOKEN,
        location=location,
        version=1,
        published=published,
        files=1,
        pending=tuple(sorted(a.model_dump_json() for a in pending)),
        applied=frozenset(applied),
        seq=1,
    )
    return plan_stage_a(
        raw, SETTINGS, SALES, run_token=TOKEN, lease=lease, manifests=Written() if written is None else written
    )


def test_a_run_checks_its_new_files_only_and_the_plan_carries_the_check_through_the_state_machine() -> None:
    old = "shop/pos/sales/day=1/a.csv@1"
    published = "s3://stage-bucket/shop/pos/sales/day=1/lakeline_run=20220101t000000000000_0123456789/"
    written = Written()
    plan = leased_plan([old], [arrival("shop/pos/sales/day=1/b.csv", "2")], published, written)
    assert plan.type_check is not None
    assert "b.csv" not in plan.type_check.check + plan.type_check.create  # named in a manifest, not in SQL
    (folder,) = re.findall(r"LOCATION '([^']+)'", plan.type_check.create)
    assert "SymlinkTextInputFormat" in plan.type_check.create
    # The new file only: a.csv was loaded (and checked) before.
    assert written[folder + "manifest"] == "s3://raw-bucket/shop/pos/sales/day=1/b.csv\n"
    # Passed on without its batch's lists (its input names the batch object), and read back whole.
    assert StageAPlan.from_dict(plan.to_dict()).with_batch(written) == plan
    assert plan.to_dict()["type_check"]["check"] == plan.type_check.check


def test_a_run_with_nothing_new_has_no_check() -> None:
    old = "shop/pos/sales/day=1/a.csv@1"
    published = "s3://stage-bucket/shop/pos/sales/day=1/lakeline_run=20220101t000000000000_0123456789/"
    plan = leased_plan([old], [arrival("shop/pos/sales/day=1/a.csv", "1")], published)
    assert plan.mode == "none" and plan.type_check is None
    assert plan.to_dict()["type_check"] is None


ORDERS = table(
    ("order_id", "bigint"), ("note", "string"), ("paid", "boolean"), ("ship", "struct<city:string>"), fmt="json"
)


def test_a_json_text_table_reads_the_checked_keys_as_strings_through_the_openx_serde() -> None:
    check = plan_type_check(ORDERS, database="shop_pos_dev", temp_table="lakeline_tmp_sales_t", location=PARTITION)
    assert check is not None and not check.spark_ddl
    # By key, not by position: only the checked columns; no header line to skip.
    assert check.create == (
        "CREATE EXTERNAL TABLE `shop_pos_dev`.`lakeline_tmp_sales_t_text` (`order_id` STRING, `paid` STRING) "
        f"ROW FORMAT SERDE 'org.openx.data.jsonserde.JsonSerDe' LOCATION '{PARTITION}'"
    )


def test_the_json_check_is_one_trino_statement_that_checks_empty_strings_and_reads_no_header() -> None:
    sql = check_of(ORDERS)
    (parsed,) = sqlglot.parse(sql, read="trino")
    assert isinstance(parsed, sqlglot.exp.Select)
    assert 'try_cast(trim("order_id") AS BIGINT)' in sql and "lower(trim(\"paid\")) IN ('true', 'false')" in sql
    assert '"order_id" IS NOT NULL AND NOT' in sql and "<> ''" not in sql  # the door refuses "" for a bigint
    assert "lower(trim(" not in sql.replace('lower(trim("paid"))', "")  # no header row to leave out
    assert '"note"' not in sql and '"ship"' not in sql
    assert "\\" not in sql


def test_a_json_table_of_strings_and_nested_columns_has_no_check() -> None:
    nested = table(("note", "string"), ("ship", "struct<city:string>"), ("tags", "array<string>"), fmt="json")
    assert plan_type_check(nested, database="d", temp_table="t", location=PARTITION) is None


def test_a_json_run_checks_its_files_before_its_ctas() -> None:
    raw = parse_raw_key("shop/pos/sales/day=1/b.json")
    plan = plan_stage_a(raw, SETTINGS, ORDERS, run_token=TOKEN)
    assert plan.type_check is not None
    assert "JsonSerDe" in plan.type_check.create and f"LOCATION '{PARTITION}'" in plan.type_check.create
    statements = plan.statements
    assert statements.index(plan.type_check.check) < statements.index(plan.ctas)
    assert StageAPlan.from_dict(plan.to_dict()) == plan
