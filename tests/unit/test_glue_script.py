"""Script analysis: sources, transforms and sinks of Glue PySpark scripts, read with ast and never run."""

from __future__ import annotations

import textwrap
import zipfile
from pathlib import Path

import pytest

from lakeline.errors import InvalidInputError
from lakeline.glue_scanner.catalog import GlueCatalog
from lakeline.glue_scanner.job_modules import ModuleSource, module_sources
from lakeline.glue_scanner.script import analyse_script
from lakeline.glue_scanner.script_analysis import ScriptAnalysis, ScriptContext, Write
from lakeline.lineage.columns.model import simplify

MANUAL = Path(__file__).parents[1] / "fixtures" / "glue" / "manual"
CATALOG = GlueCatalog.load_files(sorted(MANUAL.glob("tables.*.json")))

GLUE_PRELUDE = """\
import sys
from awsglue.context import GlueContext
from awsglue.transforms import *
from awsglue.utils import getResolvedOptions
from pyspark.context import SparkContext
from pyspark.sql import functions as F
from pyspark.sql.window import Window

glueContext = GlueContext(SparkContext.getOrCreate())
spark = glueContext.spark_session
"""

DIRECT = "DIRECT"
INDIRECT = "INDIRECT"


def analyse(
    body: str,
    *,
    arguments: dict[str, str] | None = None,
    modules: dict[str, ModuleSource] | None = None,
    prelude: bool = True,
) -> ScriptAnalysis:
    source = (GLUE_PRELUDE if prelude else "") + textwrap.dedent(body)
    context = ScriptContext("job", {"--JOB_NAME": "job", **(arguments or {})}, CATALOG, modules or {})
    return analyse_script(source, "job.py", context)


def only_write(analysis: ScriptAnalysis) -> Write:
    assert len(analysis.writes) == 1, analysis.writes
    return analysis.writes[0]


def edges(write: Write) -> dict[str, set[tuple[str, str, str]]]:
    return {column.name: simplify(column.dependencies) for column in write.columns}


def messages(analysis: ScriptAnalysis) -> list[str]:
    return [str(problem) for problem in analysis.unresolved()]


# Glue DynamicFrame transforms ------------------------------------------------------------------


def test_apply_mapping_gives_identity_for_same_type_and_transformation_for_a_cast() -> None:
    analysis = analyse(
        """
        orders = glueContext.create_dynamic_frame.from_catalog(database="sales_raw", table_name="orders")
        mapped = ApplyMapping.apply(
            frame=orders,
            mappings=[("order_id", "bigint", "id", "bigint"), ("amount", "string", "amount", "double")],
        )
        glueContext.write_dynamic_frame.from_options(
            frame=mapped, connection_type="s3", connection_options={"path": "s3://out/orders/"}, format="parquet"
        )
        """
    )
    write = only_write(analysis)
    assert write.target == "s3://out/orders"
    assert edges(write) == {
        "id": {("sales_raw.orders.order_id", DIRECT, "IDENTITY")},
        "amount": {("sales_raw.orders.amount", DIRECT, "TRANSFORMATION")},
    }
    assert write.inputs == {"sales_raw.orders"}
    assert analysis.unresolved() == []


def test_glue_join_keeps_both_sides_and_adds_indirect_join_edges_on_its_keys() -> None:
    analysis = analyse(
        """
        orders = glueContext.create_dynamic_frame.from_catalog(database="sales_raw", table_name="orders")
        customers = glueContext.create_dynamic_frame.from_catalog(database="sales_raw", table_name="customers")
        renamed = RenameField.apply(frame=customers, old_name="id", new_name="customer_ref")
        joined = Join.apply(frame1=orders, frame2=renamed, keys1=["customer_id"], keys2=["customer_ref"])
        picked = SelectFields.apply(frame=joined, paths=["order_id", "customer_ref", "name"])
        glueContext.write_dynamic_frame.from_catalog(frame=picked, database="curated", table_name="picked")
        """
    )
    write = only_write(analysis)
    assert write.target == "curated.picked"
    assert edges(write) == {
        "order_id": {("sales_raw.orders.order_id", DIRECT, "IDENTITY")},
        "customer_ref": {("sales_raw.customers.id", DIRECT, "IDENTITY")},
        "name": {("sales_raw.customers.name", DIRECT, "IDENTITY")},
    }
    assert simplify(write.dataset) == {
        ("sales_raw.orders.customer_id", INDIRECT, "JOIN"),
        ("sales_raw.customers.id", INDIRECT, "JOIN"),
    }


def test_drop_fields_filter_and_dynamic_frame_methods() -> None:
    analysis = analyse(
        """
        orders = glueContext.create_dynamic_frame_from_catalog("sales_raw", "orders")
        kept = Filter.apply(frame=orders, f=lambda row: row["status"] == "paid")
        slim = kept.drop_fields(["order_ts", "dt"]).rename_field("amount", "total")
        slim.select_fields(["order_id", "total"]).toDF().write.parquet("s3://out/paid")
        """
    )
    write = only_write(analysis)
    assert edges(write) == {
        "order_id": {("sales_raw.orders.order_id", DIRECT, "IDENTITY")},
        "total": {("sales_raw.orders.amount", DIRECT, "IDENTITY")},
    }
    assert simplify(write.dataset) == {("sales_raw.orders.status", INDIRECT, "FILTER")}


def test_a_resource_link_reads_the_table_it_points_at() -> None:
    analysis = analyse(
        """
        clients = glueContext.create_dynamic_frame.from_catalog(database="sales_raw", table_name="clients")
        clients.toDF().select("email").write.parquet("s3://out/emails")
        """
    )
    assert edges(only_write(analysis)) == {"email": {("sales_raw.customers.email", DIRECT, "IDENTITY")}}
    assert analysis.reads == {"sales_raw.customers"}


def test_push_down_predicate_is_a_filter() -> None:
    analysis = analyse(
        """
        orders = glueContext.create_dynamic_frame.from_catalog(
            database="sales_raw", table_name="orders", push_down_predicate="dt = '2024-01-01'"
        )
        orders.toDF().select("order_id").write.saveAsTable("curated.ids")
        """
    )
    assert simplify(only_write(analysis).dataset) == {("sales_raw.orders.dt", INDIRECT, "FILTER")}


def test_get_sink_with_catalog_info_writes_the_table() -> None:
    analysis = analyse(
        """
        orders = glueContext.create_dynamic_frame.from_catalog(database="sales_raw", table_name="orders")
        sink = glueContext.getSink(path="s3://lake-curated/orders/", connection_type="s3", enableUpdateCatalog=True)
        sink.setFormat("glueparquet")
        sink.setCatalogInfo(catalogDatabase="curated", catalogTableName="orders_copy")
        sink.writeFrame(orders)
        """
    )
    assert only_write(analysis).target == "curated.orders_copy"


# Job arguments -------------------------------------------------------------------------------


def test_job_arguments_resolve_sources_and_sinks() -> None:
    analysis = analyse(
        """
        args = getResolvedOptions(sys.argv, ["JOB_NAME", "DB", "TARGET"])
        frame = glueContext.create_dynamic_frame.from_catalog(database=args["DB"], table_name="orders")
        target = f"{args['TARGET']}/{args['JOB_NAME']}/"
        frame.toDF().select("order_id").write.mode("append").parquet(target)
        """,
        arguments={"--DB": "sales_raw", "--TARGET": "s3://out/base"},
    )
    write = only_write(analysis)
    assert write.target == "s3://out/base/job"
    assert edges(write) == {"order_id": {("sales_raw.orders.order_id", DIRECT, "IDENTITY")}}


def test_a_missing_argument_is_reported_at_get_resolved_options_and_where_it_is_used() -> None:
    analysis = analyse(
        """
        args = getResolvedOptions(sys.argv, ["JOB_NAME", "TARGET"])
        frame = glueContext.create_dynamic_frame.from_catalog(database="sales_raw", table_name="orders")
        glueContext.write_dynamic_frame.from_options(
            frame=frame, connection_type="s3", connection_options={"path": args["TARGET"]}
        )
        """
    )
    write = only_write(analysis)
    assert write.target is None
    assert write.inputs == {"sales_raw.orders"}
    assert messages(analysis) == [
        "line 12: job argument --TARGET has no value: it is not in "
        "DefaultArguments, the run arguments or NonOverridableArguments",
        "line 14: target path is not resolved: job argument --TARGET has no value: it is not in "
        "DefaultArguments, the run arguments or NonOverridableArguments",
    ]


def test_conditions_on_arguments_pick_their_branch() -> None:
    analysis = analyse(
        """
        args = getResolvedOptions(sys.argv, ["ENV"])
        if args["ENV"] == "prod":
            database = "sales_raw"
        else:
            database = "sales_test"
        frame = glueContext.create_dynamic_frame.from_catalog(database=database, table_name="orders")
        frame.toDF().select("status").write.parquet("s3://out/status")
        """,
        arguments={"--ENV": "prod"},
    )
    assert analysis.reads == {"sales_raw.orders"}
    assert analysis.unresolved() == []


# DataFrames ----------------------------------------------------------------------------------


def test_dataframe_columns_through_select_with_column_alias_and_rename() -> None:
    analysis = analyse(
        """
        orders = spark.table("sales_raw.orders")
        out = (
            orders.withColumn("amount_eur", F.col("amount").cast("double") * 0.92)
            .withColumn("flag", F.when(F.col("status") == "paid", F.lit(1)).otherwise(0))
            .withColumnRenamed("order_id", "id")
            .select("id", F.upper(F.col("status")).alias("status_uc"), "amount_eur", "flag", F.expr("amount || dt tag"))
        )
        out.write.format("parquet").save("s3://out/x")
        """
    )
    assert edges(only_write(analysis)) == {
        "id": {("sales_raw.orders.order_id", DIRECT, "IDENTITY")},
        "status_uc": {("sales_raw.orders.status", DIRECT, "TRANSFORMATION")},
        "amount_eur": {("sales_raw.orders.amount", DIRECT, "TRANSFORMATION")},
        "flag": {("sales_raw.orders.status", INDIRECT, "CONDITIONAL")},
        "tag": {
            ("sales_raw.orders.amount", DIRECT, "TRANSFORMATION"),
            ("sales_raw.orders.dt", DIRECT, "TRANSFORMATION"),
        },
    }


def test_join_on_an_expression_group_by_and_window() -> None:
    analysis = analyse(
        """
        orders = spark.table("sales_raw.orders").alias("o")
        customers = spark.table("sales_raw.customers").alias("c")
        joined = orders.join(customers, F.col("o.customer_id") == F.col("c.id"), "inner")
        window = Window.partitionBy("c.id").orderBy(F.col("o.order_ts").desc())
        ranked = joined.withColumn("rank", F.row_number().over(window))
        totals = ranked.where("rank <= 3").groupBy(F.col("c.name").alias("customer")).agg(F.sum("amount").alias("top3"))
        totals.write.insertInto("curated.top_customers")
        """
    )
    write = only_write(analysis)
    assert write.target == "curated.top_customers"
    # insertInto maps by position onto a table the catalog does not have: reported, no columns guessed.
    assert write.columns == ()
    assert messages(analysis) == ["line 18: insert by position into a table that is not in the catalog"]
    assert simplify(write.dataset) >= {
        ("sales_raw.orders.customer_id", INDIRECT, "JOIN"),
        ("sales_raw.customers.id", INDIRECT, "JOIN"),
        ("sales_raw.customers.id", INDIRECT, "FILTER"),
        ("sales_raw.orders.order_ts", INDIRECT, "FILTER"),
        ("sales_raw.customers.name", INDIRECT, "GROUP_BY"),
    }


def test_group_by_aggregates_and_joins_using_keys() -> None:
    analysis = analyse(
        """
        orders = spark.table("sales_raw.orders")
        customers = spark.table("sales_raw.customers").withColumnRenamed("id", "customer_id")
        per_customer = orders.join(customers, ["customer_id"], "left").groupBy("customer_id", "name").agg(
            F.sum("amount").alias("total"), F.countDistinct("order_id").alias("orders"), F.md5("email").alias("h")
        )
        per_customer.write.saveAsTable("curated.per_customer")
        """
    )
    write = only_write(analysis)
    assert edges(write) == {
        "customer_id": {("sales_raw.orders.customer_id", DIRECT, "IDENTITY")},
        "name": {("sales_raw.customers.name", DIRECT, "IDENTITY")},
        "total": {("sales_raw.orders.amount", DIRECT, "AGGREGATION")},
        "orders": {("sales_raw.orders.order_id", DIRECT, "AGGREGATION")},
        "h": {("sales_raw.customers.email", DIRECT, "TRANSFORMATION")},
    }
    masked = [c for c in write.columns if c.name in ("orders", "h")]
    assert all(edge.transformation.masking for column in masked for edge in column.dependencies)


def test_spark_sql_over_temp_views_reaches_the_frames_sources() -> None:
    analysis = analyse(
        """
        orders = glueContext.create_dynamic_frame.from_catalog(database="sales_raw", table_name="orders").toDF()
        orders.filter(F.col("status") == "paid").createOrReplaceTempView("paid")
        spark.table("sales_raw.customers").createOrReplaceTempView("people")
        result = spark.sql(
            "SELECT p.name, SUM(o.amount) AS total FROM paid o JOIN people p ON o.customer_id = p.id GROUP BY p.name"
        )
        result.write.saveAsTable("curated.totals")
        """
    )
    write = only_write(analysis)
    assert edges(write) == {
        "name": {("sales_raw.customers.name", DIRECT, "IDENTITY")},
        "total": {("sales_raw.orders.amount", DIRECT, "AGGREGATION")},
    }
    assert simplify(write.dataset) == {
        ("sales_raw.orders.status", INDIRECT, "FILTER"),
        ("sales_raw.orders.customer_id", INDIRECT, "JOIN"),
        ("sales_raw.customers.id", INDIRECT, "JOIN"),
        ("sales_raw.customers.name", INDIRECT, "GROUP_BY"),
    }
    assert write.inputs == {"sales_raw.orders", "sales_raw.customers"}


def test_spark_sql_insert_and_temp_view_statements() -> None:
    analysis = analyse(
        """
        spark.read.parquet("s3://lake-raw/sales/orders").createOrReplaceTempView("raw_orders")
        spark.sql("CREATE OR REPLACE TEMPORARY VIEW big AS SELECT order_id, amount FROM raw_orders WHERE amount > 100")
        spark.sql("INSERT INTO curated.orders (order_id, amount) SELECT order_id, amount FROM big")
        """
    )
    write = only_write(analysis)
    assert write.target == "curated.orders"
    assert edges(write) == {
        "order_id": {("sales_raw.orders.order_id", DIRECT, "IDENTITY")},
        "amount": {("sales_raw.orders.amount", DIRECT, "IDENTITY")},
    }
    assert simplify(write.dataset) == {("sales_raw.orders.amount", INDIRECT, "FILTER")}


def test_an_s3_location_of_a_catalog_table_is_that_table() -> None:
    analysis = analyse(
        """
        spark.read.parquet("s3a://lake-curated/orders/").select("customer_name").write.parquet("s3://lake-raw/sales/customers")
        """
    )
    write = only_write(analysis)
    assert write.target == "sales_raw.customers"
    assert edges(write) == {"customer_name": {("curated.orders.customer_name", DIRECT, "IDENTITY")}}


def test_a_source_without_schema_passes_named_columns_and_reports_the_rest() -> None:
    analysis = analyse(
        """
        events = spark.read.json("s3://lake-raw/events/")
        events.withColumn("kind", F.lower("type")).write.parquet("s3://out/events")
        """
    )
    write = only_write(analysis)
    assert edges(write) == {"kind": {("s3://lake-raw/events.type", DIRECT, "TRANSFORMATION")}}
    assert messages(analysis) == [
        "line 13: the columns of s3://lake-raw/events are not known (no catalog schema): "
        "only the columns the script names are traced"
    ]


def test_a_column_of_two_unknown_sources_is_ambiguous_not_guessed() -> None:
    analysis = analyse(
        """
        a = spark.read.parquet("s3://x/a")
        b = spark.read.parquet("s3://x/b")
        a.join(b, a["k"] == b["k"]).select("v").write.parquet("s3://x/out")
        """
    )
    write = only_write(analysis)
    assert edges(write) == {"v": set()}
    assert simplify(write.dataset) == {("s3://x/a.k", INDIRECT, "JOIN"), ("s3://x/b.k", INDIRECT, "JOIN")}
    assert messages(analysis) == ["line 14: column 'v' could come from s3://x/a or s3://x/b: columns not known"]


def test_a_table_missing_from_the_catalog_gets_its_target_columns_from_the_catalog() -> None:
    analysis = analyse(
        """
        staged = glueContext.create_dynamic_frame.from_catalog(database="staging", table_name="orders")
        glueContext.write_dynamic_frame.from_catalog(frame=staged, database="curated", table_name="orders")
        """
    )
    write = only_write(analysis)
    assert edges(write)["customer_name"] == {("staging.orders.customer_name", DIRECT, "IDENTITY")}
    assert [c.name for c in write.columns] == [
        "order_id",
        "customer_id",
        "amount",
        "customer_name",
        "status",
        "order_ts",
        "dt",
    ]


# Python structure ----------------------------------------------------------------------------


def test_functions_loops_and_main_guard_are_followed() -> None:
    analysis = analyse(
        """
        TABLES = ["orders", "customers"]

        def copy(table, target=None):
            frame = glueContext.create_dynamic_frame.from_catalog(database="sales_raw", table_name=table)
            frame.toDF().write.parquet(target or f"s3://copies/{table}")

        def main():
            for table in TABLES:
                copy(table)
            copy(table="orders", target="s3://copies/again")

        if __name__ == "__main__":
            main()
        """
    )
    assert [w.target for w in analysis.writes] == ["s3://copies/orders", "s3://copies/customers", "s3://copies/again"]
    assert analysis.unresolved() == []


def test_a_run_time_condition_includes_both_branches_and_says_so() -> None:
    analysis = analyse(
        """
        orders = spark.table("sales_raw.orders")
        if orders.count() > 0:
            orders.write.parquet("s3://out/a")
        else:
            orders.write.parquet("s3://out/b")
        """
    )
    assert [w.target for w in analysis.writes] == ["s3://out/a", "s3://out/b"]
    assert messages(analysis) == [
        "line 13: condition 'orders.count() > 0' is only known at run time: both branches' writes are included"
    ]


def test_dynamic_names_and_unknown_calls_are_reported_with_their_lines() -> None:
    analysis = analyse(
        """
        import datetime
        table = "events_" + datetime.date.today().isoformat()
        events = glueContext.create_dynamic_frame.from_catalog(database="sales_raw", table_name=table)
        events.toDF().write.parquet("s3://out/events")
        orders = spark.table("sales_raw.orders").withColumn("score", my_model(F.col("amount")))
        orders.rdd.map(lambda row: row).toDF().write.parquet("s3://out/rdd")
        orders.select("score", "amount").write.parquet("s3://out/scores")
        """
    )
    assert messages(analysis) == [
        "line 14: catalog table name is not resolved: call to datetime.date.today is not analysed",
        "line 16: name 'my_model' is not defined where it is used",
        "line 17: RDD.map() changes rows in ways that are not analysed",
    ]
    # Where each frame goes is still known, whatever is unknown about its columns.
    assert [w.target for w in analysis.writes] == ["s3://out/events", "s3://out/rdd", "s3://out/scores"]
    scores = analysis.writes[-1]
    assert edges(scores) == {"score": set(), "amount": {("sales_raw.orders.amount", DIRECT, "IDENTITY")}}


def test_the_script_is_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    analysis = analyse(
        f"""
        import os
        os.system("touch {marker}")
        open("{marker}", "w").write("x")
        """,
        prelude=False,
    )
    assert not marker.exists()
    assert messages(analysis) == ["the script writes nothing that is recognised as a sink"]


def test_a_syntax_error_is_a_clear_error() -> None:
    with pytest.raises(InvalidInputError, match=r"job.py line 1: syntax error"):
        analyse("def broken(:\n", prelude=False)


# Extra .py files -----------------------------------------------------------------------------


def test_names_and_functions_imported_from_extra_files(tmp_path: Path) -> None:
    (tmp_path / "naming.py").write_text('DATABASE = "sales_raw"\nTARGETS = {"orders": "s3://out/orders"}\n')
    with zipfile.ZipFile(tmp_path / "libs.zip", "w") as archive:
        archive.writestr("readers/__init__.py", "")
        archive.writestr(
            "readers/catalog.py",
            "from naming import DATABASE\n\n"
            "def read(glue_context, table):\n"
            "    return glue_context.create_dynamic_frame.from_catalog(database=DATABASE, table_name=table).toDF()\n",
        )
    modules = module_sources([tmp_path / "naming.py", tmp_path / "libs.zip"])
    assert sorted(modules) == ["naming", "readers", "readers.catalog"]
    analysis = analyse(
        """
        from naming import TARGETS
        from readers.catalog import read
        read(glueContext, "orders").select("amount").write.parquet(TARGETS["orders"])
        """,
        modules=modules,
    )
    write = only_write(analysis)
    assert write.target == "s3://out/orders"
    assert edges(write) == {"amount": {("sales_raw.orders.amount", DIRECT, "IDENTITY")}}


def test_problems_inside_an_extra_file_name_that_file() -> None:
    helper = (
        "def read(glue_context, table):\n"
        "    return glue_context.create_dynamic_frame.from_catalog(database=DB, table_name=table)\n"
    )
    analysis = analyse(
        """
        import helper
        helper.read(glueContext, "orders").toDF().write.parquet("s3://out/x")
        """,
        modules={"helper": ModuleSource("helper", "helper.py", helper)},
    )
    assert messages(analysis) == [
        "helper.py line 2: catalog table name is not resolved: name 'DB' is not defined where it is used"
    ]


def test_an_import_that_is_neither_library_nor_extra_file_is_reported_when_used() -> None:
    analysis = analyse(
        """
        from company_lib import TARGET
        spark.table("sales_raw.orders").write.parquet(TARGET)
        """
    )
    assert messages(analysis) == [
        "line 13: target path is not resolved: module 'company_lib.TARGET' is neither a known library "
        "nor one of the job's extra files"
    ]


def test_a_hostile_script_cannot_make_the_analysis_run_away() -> None:
    analysis = analyse(
        """
        orders = spark.table("sales_raw.orders")
        orders.write.parquet("x" * 10**9)
        orders.write.parquet("{:>999999999}".format("a"))
        orders.write.parquet(f"{'a':>999999999}")
        orders.write.parquet("%0999999999d" % 5)
        orders.write.parquet("s3://out/{}/{:>4}".format(2024, "x") + "%05d" % 7)
        for i in range(200):
            for j in range(200):
                for k in range(200):
                    pass
        """
    )
    assert [w.target for w in analysis.writes] == [None, None, None, None, "s3://out/2024/   x00007"]
    assert messages(analysis) == [
        "the analysis stopped after 100000 statements",
        "line 13: target path is not resolved: a value this large is not computed",
        "line 14: target path is not resolved: str.format() this wide is not computed",
        "line 15: target path is not resolved: a format this wide is not computed",
        "line 16: target path is not resolved: a value this large is not computed",
    ]
