"""Data outside S3 (JDBC, DynamoDB, Kinesis, Kafka, connectors), real argument patterns, Python 2 and
Glue's nested-data transforms, over the corpus folder's catalog and Glue Connections."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from benchmarks.glue_scanner import CORPUS, analyse_corpus, expected_lineage, scanned_lineage
from lakeline.glue_scanner import datasets as ds
from lakeline.glue_scanner.folder import load_folder
from lakeline.glue_scanner.py2 import convert_python2
from lakeline.glue_scanner.script import analyse_script
from lakeline.glue_scanner.script_analysis import ScriptAnalysis, ScriptContext, Write
from lakeline.lineage.columns.model import simplify

FOLDER = load_folder(CORPUS)
PG = "postgres://pg.internal:5432/sales.public.orders"
DDB = "arn:aws:dynamodb:eu-west-1:123456789012:table/events"
PRELUDE = """\
import sys
from awsglue.context import GlueContext
from awsglue.transforms import *
from awsglue.utils import getResolvedOptions
from pyspark.context import SparkContext
glueContext = GlueContext(SparkContext.getOrCreate())
"""


def analyse(body: str, arguments: dict[str, str] | None = None, *, prelude: bool = True) -> ScriptAnalysis:
    context = ScriptContext(
        "job", {"--JOB_NAME": "job", **(arguments or {})}, FOLDER.catalog, region="eu-west-1", account="123456789012"
    )
    return analyse_script((PRELUDE if prelude else "") + textwrap.dedent(body), "job.py", context)


def edges(write: Write) -> dict[str, set[tuple[str, str, str]]]:
    return {column.name: simplify(column.dependencies) for column in write.columns}


def messages(analysis: ScriptAnalysis) -> list[str]:
    return [str(problem) for problem in analysis.unresolved()]


# Naming --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "table", "database", "expected"),
    [
        ("jdbc:postgresql://PG.internal/sales", "orders", None, "postgres://pg.internal:5432/sales.public.orders"),
        ("jdbc:postgresql://pg:5433/sales", "crm.people", "other", "postgres://pg:5433/other.crm.people"),
        ("jdbc:mysql://crm:3306/crm", "contacts", None, "mysql://crm:3306/crm.contacts"),
        ("jdbc:mysql://crm:3306/crm", "crm2.contacts", None, "mysql://crm:3306/crm2.contacts"),
        (
            "jdbc:redshift://dw.abc.eu-west-1.redshift.amazonaws.com:5439/dev",
            "analytics.orders",
            None,
            "redshift://dw.eu-west-1:5439/dev.analytics.orders",
        ),
        ("jdbc:sqlserver://ms:1433;databaseName=erp", "invoices", None, "mssql://ms:1433/erp.dbo.invoices"),
        ("jdbc:oracle:thin:@ora:1521:ORCL", "HR.EMP", None, "oracle://ora:1521/ORCL.HR.EMP"),
    ],
)
def test_jdbc_datasets_follow_the_openlineage_naming_spec(
    url: str, table: str, database: str | None, expected: str
) -> None:
    assert ds.jdbc_dataset(url, table, database) == expected


def test_naming_fails_with_the_reason_when_a_part_is_missing() -> None:
    with pytest.raises(ds.NamingError, match="names no schema"):
        ds.jdbc_dataset("jdbc:oracle:thin:@ora:1521:ORCL", "EMP")
    with pytest.raises(ds.NamingError, match="account of DynamoDB table 'events'"):
        ds.dynamodb_dataset("events", "eu-west-1", None)
    assert ds.split_dataset(DDB) == ("arn:aws:dynamodb:eu-west-1:123456789012", "table/events")
    assert ds.split_dataset("kafka://b-1:9094/payments") == ("kafka://b-1:9094", "payments")
    assert ds.split_dataset("sales_raw.orders") is None
    assert ds.kinesis_dataset({"streamARN": "arn:aws:kinesis:us-east-1:1:stream/clicks"}, None) == (
        "kinesis://kinesis.us-east-1.amazonaws.com/clicks"
    )


# JDBC, DynamoDB, streams ---------------------------------------------------------------------


def test_a_jdbc_conf_sink_is_named_from_the_glue_connection_and_keeps_the_mapping() -> None:
    analysis = analyse(
        """
        orders = glueContext.create_dynamic_frame.from_catalog(database="sales_raw", table_name="orders")
        mapped = ApplyMapping.apply(frame=orders, mappings=[("order_id", "bigint", "id", "int")])
        glueContext.write_dynamic_frame.from_jdbc_conf(
            frame=mapped, catalog_connection="pg-sales", connection_options={"dbtable": "public.ids"}
        )
        """
    )
    (write,) = analysis.writes
    assert write.target == "postgres://pg.internal:5432/sales.public.ids"
    assert edges(write) == {"id": {("sales_raw.orders.order_id", "DIRECT", "TRANSFORMATION")}}
    assert analysis.unresolved() == []


def test_an_unknown_connection_is_reported_at_the_sink() -> None:
    analysis = analyse(
        """
        orders = glueContext.create_dynamic_frame.from_catalog(database="sales_raw", table_name="orders")
        glueContext.write_dynamic_frame.from_jdbc_conf(
            frame=orders, catalog_connection="nowhere", connection_options={"dbtable": "t"}
        )
        """
    )
    assert analysis.writes[0].target is None
    assert messages(analysis) == [
        "line 9: sink: Glue connection 'nowhere' is not in the extracted connections (connections.json)"
    ]


def test_catalog_tables_stored_outside_s3_are_named_by_where_their_data_is() -> None:
    analysis = analyse(
        """
        pg = glueContext.create_dynamic_frame.from_catalog(database="pg_sales", table_name="sales_public_orders")
        kinds = pg.select_fields(["status"])
        glueContext.write_dynamic_frame.from_catalog(frame=kinds, database="ddb", table_name="events")
        """
    )
    (write,) = analysis.writes
    assert analysis.reads == {PG}
    assert write.target == DDB
    assert edges(write) == {"status": {(f"{PG}.status", "DIRECT", "IDENTITY")}}
    assert {dataset for dataset in analysis.schemas} == {PG, DDB}


def test_dynamodb_and_kafka_sources_by_options_take_their_columns_from_the_catalog() -> None:
    analysis = analyse(
        """
        events = glueContext.create_dynamic_frame.from_options(
            connection_type="dynamodb", connection_options={"dynamodb.input.tableName": "events"}
        )
        payments = glueContext.create_data_frame.from_options(
            connection_type="kafka", connection_options={"connectionName": "kafka-msk", "topicName": "payments"}
        )
        events.toDF().write.parquet("s3://out/events")
        payments.write.parquet("s3://out/payments")
        """
    )
    events, payments = analysis.writes
    assert [c.name for c in events.columns] == ["event_id", "user_id", "kind", "created_at"]
    assert edges(payments)["amount"] == {("kafka://b-1.msk.internal:9094/payments.amount", "DIRECT", "IDENTITY")}


def test_for_each_batch_follows_the_batch_function_over_the_stream() -> None:
    analysis = analyse(
        """
        clicks = glueContext.create_data_frame.from_catalog(database="streams", table_name="clicks")

        def process(frame, batch_id):
            frame.select("page").write.mode("append").parquet("s3://out/pages/" + str(batch_id))
            frame.select("user_id").write.parquet("s3://out/users")

        glueContext.forEachBatch(frame=clicks, batch_function=process, options={"windowSize": "10 seconds"})
        """
    )
    pages, users = analysis.writes
    assert pages.target is None  # the path holds the batch id: known only when the stream runs
    assert users.target == "s3://out/users"
    assert edges(users) == {
        "user_id": {("kinesis://kinesis.eu-west-1.amazonaws.com/clicks.user_id", "DIRECT", "IDENTITY")}
    }
    assert "the batch id is only known when the stream runs" in messages(analysis)[0]


# Arguments -----------------------------------------------------------------------------------


def test_parameters_appended_under_sys_argv_tests_resolve() -> None:
    analysis = analyse(
        """
        params = ["JOB_NAME", "table"]
        if "--target" in sys.argv:
            params.append("target")
        if "--missing" in sys.argv:
            params.append("missing")
        args = getResolvedOptions(sys.argv, params)
        target = args["target"] if "target" in args else "s3://default/"
        missing = "missing" in args
        frame = glueContext.create_dynamic_frame.from_catalog(database="sales_raw", table_name=args["table"])
        if not missing:
            frame.toDF().write.parquet(target)
        """,
        {"--table": "orders", "--target": "s3://out/orders/"},
    )
    assert [w.target for w in analysis.writes] == ["s3://out/orders"]
    assert analysis.unresolved() == []


# Python 2 ------------------------------------------------------------------------------------


def test_a_python_2_script_is_analysed_with_its_own_line_numbers() -> None:
    analysis = analyse(
        """
        print "start"
        try:
            orders = glueContext.create_dynamic_frame.from_catalog(database="sales_raw", table_name="orders")
        except Exception, e:
            print >>sys.stderr, "failed: %s" % e
            raise RuntimeError, "no orders"
        orders.toDF().write.parquet(unknown_target)
        """
    )
    assert analysis.python2
    assert messages(analysis) == [
        "line 14: target path is not resolved: name 'unknown_target' is not defined where it is used"
    ]


def test_the_python_2_rewrite_changes_only_what_python_3_refuses() -> None:
    source = 'x = 10L <> 0777\nprint "a", `x`  # note\nprint\nexec "y = 1"\ns = ur"\\d"\nprint("ok")\n'
    assert convert_python2(source) == (
        'x = 10 != 0o777\nprint("a", repr(x)  )# note\nprint()\nexec("y = 1")\ns = r"\\d"\nprint("ok")\n'
    )


# Nested data ---------------------------------------------------------------------------------


def test_make_cols_columns_get_glue_names_from_the_target_or_are_reported() -> None:
    analysis = analyse(
        """
        prices = glueContext.create_dynamic_frame.from_catalog(database="lake", table_name="prices")
        split = prices.resolveChoice(specs=[("price", "make_cols")])
        glueContext.write_dynamic_frame.from_catalog(frame=split, database="lake", table_name="prices_resolved")
        split.toDF().write.parquet("s3://out/prices")
        """
    )
    catalog_write, path_write = analysis.writes
    assert edges(catalog_write)["price_string"] == {("lake.prices.price", "DIRECT", "IDENTITY")}
    assert [c.name for c in path_write.columns] == ["product_id"]
    assert messages(analysis) == [
        "line 11: make_cols writes price as <name>_<type> columns, one per type found at run time"
    ]


def test_relationalize_names_every_table_as_glue_does() -> None:
    analysis = analyse(
        """
        persons = glueContext.create_dynamic_frame.from_catalog(database="lake", table_name="persons")
        tables = Relationalize.apply(frame=persons, staging_path="s3://tmp/", name="root")
        for name in tables.keys():
            tables.select(name).toDF().write.parquet("s3://out/" + name)
        """
    )
    root, contacts = analysis.writes
    assert (root.target, contacts.target) == ("s3://out/root", "s3://out/root_contact_details")
    assert [c.name for c in root.columns] == ["id", "name.first", "name.last", "contact_details"]
    assert edges(contacts) == {
        "id": set(),
        "index": set(),
        "contact_details.val.type": {("lake.persons.contact_details", "DIRECT", "IDENTITY")},
        "contact_details.val.value": {("lake.persons.contact_details", "DIRECT", "IDENTITY")},
    }


def test_map_follows_the_fields_a_record_function_sets_and_deletes() -> None:
    analysis = analyse(
        """
        def clean(rec):
            rec["email"] = rec["email"].lower()
            rec["tag"] = "x"
            del rec["country"]
            return rec

        customers = glueContext.create_dynamic_frame.from_catalog(database="sales_raw", table_name="customers")
        customers.map(f=clean).toDF().write.parquet("s3://out/clean")
        """
    )
    assert edges(analysis.writes[0]) == {
        "id": {("sales_raw.customers.id", "DIRECT", "IDENTITY")},
        "name": {("sales_raw.customers.name", "DIRECT", "IDENTITY")},
        "email": {("sales_raw.customers.email", "DIRECT", "TRANSFORMATION")},
        "tag": set(),
    }


# The corpus ----------------------------------------------------------------------------------


def test_the_corpus_lineage_meets_the_issue_goals() -> None:
    expected, scripts = expected_lineage(FOLDER)
    results = analyse_corpus(FOLDER)
    scanned = {result.name: scanned_lineage(result) for result in results}
    exact = sum(1 for name, wanted in expected.items() if scanned[name].datasets == wanted.datasets)
    wanted_edges = set().union(*(lineage.edges for lineage in expected.values()))
    found_edges = set().union(*(lineage.edges for lineage in scanned.values()))
    wanted_datasets = set().union(*(lineage.datasets for lineage in expected.values()))
    found_datasets = set().union(*(lineage.datasets for lineage in scanned.values()))
    assert exact / scripts >= 0.9
    assert len(wanted_datasets & found_datasets) / len(wanted_datasets) >= 0.95
    assert len(wanted_edges & found_edges) / len(wanted_edges) >= 0.95
    assert len(wanted_edges & found_edges) / len(found_edges) >= 0.99
    assert all(result.error is None for result in results)
    assert Path(CORPUS / "connections.json").is_file()
