"""The local Athena endpoint (#20): queries started on the deployment's Athena API run on embedded Spark,
against the Glue catalog and the S3 objects of the deployment, and what they change is in Glue and S3
afterwards, where the deployed functions read it. Driven through the API only (boto3 and pyathena)."""

from __future__ import annotations

import contextlib
import datetime
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lakeline.runtimes.deployed.local_aws.athena import LocalAthena
from lakeline.runtimes.deployed.local_aws.deploy import Deployment

if TYPE_CHECKING:
    from lakeline.engines.spark import SparkEngine

pytestmark = pytest.mark.spark

DATA, RESULTS = "lakeline-local-athena-data", "lakeline-local-athena-results"
DATABASE = "local_athena_sales"
OUTPUT = f"s3://{RESULTS}/queries/"
OPEN_CSV = "org.apache.hadoop.hive.serde2.OpenCSVSerde"
LAZY_SIMPLE = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
ORC_SERDE = "org.apache.hadoop.hive.ql.io.orc.OrcSerde"


def run(deployment: Deployment, sql: str, *, database: str | None = None, output: str = OUTPUT) -> dict[str, Any]:
    """Start ``sql`` and poll until it ends, as the ``.sync`` integration and AthenaEngine do."""
    athena = deployment.client("athena")
    request: dict[str, Any] = {"QueryString": sql, "ResultConfiguration": {"OutputLocation": output}}
    if database:
        request["QueryExecutionContext"] = {"Database": database}
    query_id = athena.start_query_execution(**request)["QueryExecutionId"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        execution: dict[str, Any] = athena.get_query_execution(QueryExecutionId=query_id)["QueryExecution"]
        if execution["Status"]["State"] in {"SUCCEEDED", "FAILED", "CANCELLED"}:
            return execution
        time.sleep(0.02)
    raise AssertionError(f"query {query_id} did not end: {sql}")


def succeeded(deployment: Deployment, sql: str, *, database: str | None = None, output: str = OUTPUT) -> dict[str, Any]:
    execution = run(deployment, sql, database=database, output=output)
    assert execution["Status"]["State"] == "SUCCEEDED", execution["Status"]
    return execution


def rows(deployment: Deployment, execution: dict[str, Any]) -> list[list[str | None]]:
    result = deployment.client("athena").get_query_results(QueryExecutionId=execution["QueryExecutionId"])
    return [[cell.get("VarCharValue") for cell in row["Data"]] for row in result["ResultSet"]["Rows"]]


def keys(deployment: Deployment, bucket: str, prefix: str) -> list[str]:
    listed = deployment.client("s3").list_objects_v2(Bucket=bucket, Prefix=prefix)
    return sorted(item["Key"] for item in listed.get("Contents", []))


def pyathena_cursor(deployment: Deployment) -> Any:
    """A pyathena cursor on the endpoint, in the sales database."""
    import pyathena

    assert deployment.credentials is not None  # IAM is enforced: pyathena signs as the operator
    connection = pyathena.connect(
        s3_staging_dir=OUTPUT,
        region_name=deployment.region,
        endpoint_url=deployment.endpoint,
        schema_name=DATABASE,
        **deployment.credentials.client_arguments(),
    )
    return connection.cursor()


@pytest.fixture(scope="module")
def sales(deployment: Deployment, local_athena: LocalAthena) -> str:
    """A raw CSV table as a team defines it in Glue (OpenCSVSerde, a header line), with one partition."""
    s3, glue = deployment.client("s3"), deployment.client("glue")
    for bucket in (DATA, RESULTS):
        with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
            s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=DATA, Key="sales/date=20240301/a.csv", Body=b'id,item,amount\n1,"tea, green",2.5\n2,cake,4\n')
    glue.create_database(DatabaseInput={"Name": DATABASE})
    columns = [("id", "bigint"), ("item", "string"), ("amount", "double")]
    descriptor = {
        "Columns": [{"Name": name, "Type": kind} for name, kind in columns],
        "Location": f"s3://{DATA}/sales/",
        "InputFormat": "org.apache.hadoop.mapred.TextInputFormat",
        "OutputFormat": "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        "SerdeInfo": {"SerializationLibrary": OPEN_CSV, "Parameters": {"separatorChar": ","}},
    }
    glue.create_table(
        DatabaseName=DATABASE,
        TableInput={
            "Name": "sales",
            "TableType": "EXTERNAL_TABLE",
            "Parameters": {"skip.header.line.count": "1", "classification": "csv"},
            "PartitionKeys": [{"Name": "date", "Type": "string"}],
            "StorageDescriptor": descriptor,
        },
    )
    glue.create_partition(
        DatabaseName=DATABASE,
        TableName="sales",
        PartitionInput={
            "Values": ["20240301"],
            "StorageDescriptor": {**descriptor, "Location": f"s3://{DATA}/sales/date=20240301/"},
        },
    )
    return f"{DATABASE}.sales"


def test_a_glue_table_over_a_csv_in_s3_answers_a_select_with_its_results_where_athena_puts_them(
    deployment: Deployment, sales: str
) -> None:
    execution = succeeded(deployment, f"SELECT id, item, amount FROM {sales} ORDER BY id")
    assert rows(deployment, execution) == [["id", "item", "amount"], ["1", "tea, green", "2.5"], ["2", "cake", "4.0"]]
    result = deployment.client("athena").get_query_results(QueryExecutionId=execution["QueryExecutionId"])
    assert [(c["Name"], c["Type"]) for c in result["ResultSet"]["ResultSetMetadata"]["ColumnInfo"]] == [
        ("id", "bigint"),
        ("item", "varchar"),
        ("amount", "double"),
    ]
    location = execution["ResultConfiguration"]["OutputLocation"]
    assert location == f"{OUTPUT}{execution['QueryExecutionId']}.csv"
    body = deployment.client("s3").get_object(Bucket=RESULTS, Key=location.removeprefix(f"s3://{RESULTS}/"))
    assert body["Body"].read().decode() == '"id","item","amount"\n"1","tea, green","2.5"\n"2","cake","4.0"\n'
    assert execution["StatementType"] == "DML"
    assert execution["Statistics"]["EngineExecutionTimeInMillis"] > 0


def test_show_databases_lists_glues_and_a_like_pattern_filters_them(deployment: Deployment, sales: str) -> None:
    """Athena's SHOW DATABASES / SCHEMAS [LIKE 'regex']: the catalog's databases, never Spark's own."""
    listed = [row[0] for row in rows(deployment, succeeded(deployment, "SHOW DATABASES"))]
    assert DATABASE in listed and "default" in listed
    assert not any(name.startswith("athena_local__") for name in listed)
    filtered = succeeded(deployment, "show schemas like 'local_athena_.*';")
    assert rows(deployment, filtered) == [[DATABASE]]
    bad = run(deployment, "SHOW DATABASES LIKE '('")
    assert bad["Status"]["State"] == "FAILED" and "is not a regular expression" in bad["Status"]["StateChangeReason"]


def test_pyathena_reads_a_select_s_rows_with_their_types(deployment: Deployment, sales: str) -> None:
    cursor = pyathena_cursor(deployment)
    cursor.execute("SELECT item, amount * 2 AS twice FROM sales WHERE id = 1")
    assert cursor.fetchall() == [("tea, green", 5.0)]
    assert [column[0] for column in cursor.description] == ["item", "twice"]


def test_an_unqualified_table_takes_the_context_database_and_without_one_fails_like_athena(
    deployment: Deployment, sales: str
) -> None:
    assert rows(deployment, succeeded(deployment, "SELECT count(*) AS n FROM sales", database=DATABASE)) == [
        ["n"],
        ["2"],
    ]
    failed = run(deployment, "SELECT count(*) FROM sales")
    assert failed["Status"]["State"] == "FAILED"
    reason = failed["Status"]["StateChangeReason"]
    assert "`default`.`sales`" in reason and "cannot be found" in reason, reason
    assert "athena_rehearsal__" not in reason
    assert failed["Status"]["AthenaError"]["ErrorMessage"] == reason


def test_a_failing_statement_is_failed_with_the_engine_s_one_line_reason(deployment: Deployment, sales: str) -> None:
    failed = run(deployment, "SELECT no_such_column FROM sales", database=DATABASE)
    assert failed["Status"]["State"] == "FAILED"
    reason = failed["Status"]["StateChangeReason"]
    assert "no_such_column" in reason and "\n" not in reason, reason
    with pytest.raises(deployment.client("athena").exceptions.InvalidRequestException):
        deployment.client("athena").get_query_results(QueryExecutionId=failed["QueryExecutionId"])


def test_a_query_string_over_athena_s_quota_is_refused_when_started(deployment: Deployment, sales: str) -> None:
    """Athena takes at most 262,144 bytes of SQL (#39: a compaction listing every loaded file passed it)."""
    athena = deployment.client("athena")
    listed = ", ".join(f"'s3://{DATA}/sales/date=20240301/file-{index:06d}.csv'" for index in range(6_000))
    query = f'SELECT count(*) FROM sales WHERE "$path" IN ({listed})'
    assert len(query.encode()) > 262_144
    with pytest.raises(athena.exceptions.InvalidRequestException, match="at most 262144"):
        athena.start_query_execution(QueryString=query, QueryExecutionContext={"Database": DATABASE})
    fits = f'SELECT count(*) FROM sales WHERE "$path" IN ({listed[:250_000].rsplit(",", 1)[0]})'
    assert run(deployment, fits, database=DATABASE)["Status"]["State"] == "SUCCEEDED"


def test_a_ctas_into_a_database_glue_does_not_have_fails_and_writes_nothing(deployment: Deployment, sales: str) -> None:
    location = f"s3://{DATA}/nowhere/"
    failed = run(deployment, f"CREATE TABLE no_such_db.t WITH (external_location = '{location}') AS SELECT 1 AS a")
    assert failed["Status"]["State"] == "FAILED"
    assert failed["Status"]["StateChangeReason"] == "SCHEMA_NOT_FOUND: Schema 'no_such_db' does not exist"
    assert keys(deployment, DATA, "nowhere/") == []


def test_a_ctas_writes_parquet_into_s3_and_its_table_into_glue_and_drop_keeps_the_files(
    deployment: Deployment, sales: str
) -> None:
    glue = deployment.client("glue")
    location = f"s3://{DATA}/expensive/run=1/"
    execution = succeeded(
        deployment,
        f"CREATE TABLE {DATABASE}.expensive WITH (format = 'PARQUET', external_location = '{location}', "
        "bucketed_by = ARRAY['id'], bucket_count = 1, write_compression = 'SNAPPY') "
        "AS SELECT id, item FROM sales WHERE amount > 3",
        database=DATABASE,
    )
    assert execution["StatementType"] == "DDL"
    assert execution["ResultConfiguration"]["OutputLocation"].endswith(f"{execution['QueryExecutionId']}.txt")
    files = keys(deployment, DATA, "expensive/run=1/")
    assert len(files) == 1 and files[0].endswith(".snappy.parquet"), files  # no _SUCCESS, no .crc
    table = glue.get_table(DatabaseName=DATABASE, Name="expensive")["Table"]
    assert table["StorageDescriptor"]["Location"] == location
    assert [c["Name"] for c in table["StorageDescriptor"]["Columns"]] == ["id", "item"]
    assert "Parquet" in table["StorageDescriptor"]["SerdeInfo"]["SerializationLibrary"]
    assert table["StorageDescriptor"]["NumberOfBuckets"] == 1

    assert rows(deployment, succeeded(deployment, f"SELECT item FROM {DATABASE}.expensive")) == [["item"], ["cake"]]
    succeeded(deployment, f"DROP TABLE {DATABASE}.expensive")
    with pytest.raises(glue.exceptions.EntityNotFoundException):
        glue.get_table(DatabaseName=DATABASE, Name="expensive")
    assert keys(deployment, DATA, "expensive/run=1/") == files


def test_partitions_added_by_a_statement_are_in_glue_and_files_put_after_are_read(
    deployment: Deployment, sales: str
) -> None:
    s3, glue = deployment.client("s3"), deployment.client("glue")
    s3.put_object(Bucket=DATA, Key="sales/date=20240302/b.csv", Body=b"id,item,amount\n3,jam,1\n")
    where = f"s3://{DATA}/sales/date=20240302/"
    add = f"ALTER TABLE sales ADD IF NOT EXISTS PARTITION (date = '20240302') LOCATION '{where}'"
    succeeded(deployment, add, database=DATABASE)
    partitions = glue.get_partitions(DatabaseName=DATABASE, TableName="sales")["Partitions"]
    assert {(tuple(p["Values"]), p["StorageDescriptor"]["Location"]) for p in partitions} == {
        (("20240301",), f"s3://{DATA}/sales/date=20240301/"),
        (("20240302",), where),
    }
    # A file that arrives in S3 after the partition exists is read by the next query.
    s3.put_object(Bucket=DATA, Key="sales/date=20240302/c.csv", Body=b"id,item,amount\n4,tea,3\n")
    found = rows(deployment, succeeded(deployment, f"SELECT id FROM {sales} WHERE date = '20240302' ORDER BY id"))
    assert found == [["id"], ["3"], ["4"]]
    # A partition dropped in Glue by someone else (a function) is gone for the next query too.
    glue.batch_delete_partition(DatabaseName=DATABASE, TableName="sales", PartitionsToDelete=[{"Values": ["20240302"]}])
    assert rows(deployment, succeeded(deployment, f"SELECT count(*) AS n FROM {sales}")) == [["n"], ["2"]]


def test_a_query_stopped_before_it_runs_is_cancelled_and_a_finished_one_stays_succeeded(
    deployment: Deployment, sales: str
) -> None:
    athena = deployment.client("athena")
    request = {"ResultConfiguration": {"OutputLocation": OUTPUT}, "QueryExecutionContext": {"Database": DATABASE}}
    first = athena.start_query_execution(QueryString="SELECT count(*) FROM sales", **request)["QueryExecutionId"]
    second = athena.start_query_execution(QueryString="SELECT 1", **request)["QueryExecutionId"]
    # Both starts answered at once; the first still runs, the second waits its turn.
    assert athena.get_query_execution(QueryExecutionId=second)["QueryExecution"]["Status"]["State"] == "QUEUED"
    athena.stop_query_execution(QueryExecutionId=second)
    ends = {}
    for query_id in (first, second):
        deadline = time.monotonic() + 60
        state = "QUEUED"
        while state in {"QUEUED", "RUNNING"} and time.monotonic() < deadline:
            state = athena.get_query_execution(QueryExecutionId=query_id)["QueryExecution"]["Status"]["State"]
            time.sleep(0.02)
        ends[query_id] = state
    assert ends == {first: "SUCCEEDED", second: "CANCELLED"}
    athena.stop_query_execution(QueryExecutionId=first)
    assert athena.get_query_execution(QueryExecutionId=first)["QueryExecution"]["Status"]["State"] == "SUCCEEDED"


def test_a_partitioned_ctas_and_an_insert_write_partitions_into_glue_and_files_into_s3(
    deployment: Deployment, sales: str
) -> None:
    """From a pipe-delimited LazySimpleSerDe table without a header: a CTAS partitioned by a column,
    then an INSERT that adds a partition, each partition's files in its folder under the table's."""
    s3, glue = deployment.client("s3"), deployment.client("glue")
    s3.put_object(Bucket=DATA, Key="stock/all.txt", Body=b"tea|3|a\njam|0|a\ncake|5|b\n")
    columns = [("item", "string"), ("units", "int"), ("shelf", "string")]
    lazy_simple = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
    glue.create_table(
        DatabaseName=DATABASE,
        TableInput={
            "Name": "stock",
            "StorageDescriptor": {
                "Columns": [{"Name": name, "Type": kind} for name, kind in columns],
                "Location": f"s3://{DATA}/stock/",
                "SerdeInfo": {"SerializationLibrary": lazy_simple, "Parameters": {"field.delim": "|"}},
            },
        },
    )
    location = f"s3://{DATA}/by_shelf/"
    succeeded(
        deployment,
        f"CREATE TABLE by_shelf WITH (format = 'PARQUET', external_location = '{location}', "
        "partitioned_by = ARRAY['shelf']) AS SELECT item, units, shelf FROM stock WHERE units > 0",
        database=DATABASE,
    )
    succeeded(deployment, "INSERT INTO by_shelf SELECT 'bread', 2, 'c'", database=DATABASE)
    table = glue.get_table(DatabaseName=DATABASE, Name="by_shelf")["Table"]
    assert [c["Name"] for c in table["PartitionKeys"]] == ["shelf"]
    partitions = glue.get_partitions(DatabaseName=DATABASE, TableName="by_shelf")["Partitions"]
    assert sorted((p["Values"][0], p["StorageDescriptor"]["Location"]) for p in partitions) == [
        (shelf, f"{location}shelf={shelf}") for shelf in "abc"
    ]
    assert {key.split("/")[1] for key in keys(deployment, DATA, "by_shelf/")} == {"shelf=a", "shelf=b", "shelf=c"}
    found = rows(deployment, succeeded(deployment, f"SELECT item, units FROM {DATABASE}.by_shelf ORDER BY item"))
    assert found == [["item", "units"], ["bread", "2"], ["cake", "5"], ["tea", "3"]]


def test_path_and_unnamed_columns_are_headed_as_athena_heads_them(deployment: Deployment, sales: str) -> None:
    """``"$path"`` is headed ``$path`` (Spark: ``input_file_name()``) and an expression without an alias
    ``_col<position>`` (Spark: ``count(1)``), as Athena heads them (#36)."""
    found = rows(deployment, succeeded(deployment, f'SELECT "$path", item FROM {sales} WHERE id = 1'))
    assert found == [["$path", "item"], [f"s3://{DATA}/sales/date=20240301/a.csv", "tea, green"]]
    query = f"SELECT count(*), item, upper(item), sum(amount) AS total FROM {sales} WHERE id = 2 GROUP BY item"
    found = rows(deployment, succeeded(deployment, query))
    assert found == [["_col0", "item", "_col2", "total"], ["1", "cake", "CAKE", "4.0"]]


def test_lakeline_s_athena_engine_runs_against_the_endpoint(deployment: Deployment, sales: str) -> None:
    from lakeline.engines.athena import AthenaEngine, AthenaSettings
    from lakeline.engines.base import QueryFailed

    settings = AthenaSettings(output_location=OUTPUT, poll_initial_seconds=0.02, poll_max_seconds=0.1)
    engine = AthenaEngine(deployment.client("athena"), settings, glue=deployment.client("glue"))
    assert engine.execute("SELECT item FROM sales WHERE id = 2", database=DATABASE).rows == [("cake",)]
    assert engine.describe_table(DATABASE, "sales").format == "csv"
    with pytest.raises(QueryFailed, match="no_such_table"):
        engine.execute("SELECT * FROM no_such_table", database=DATABASE)


def test_a_table_created_with_athena_ddl_is_in_glue_with_its_serde_and_reads_its_files(
    deployment: Deployment, sales: str
) -> None:
    deployment.client("s3").put_object(Bucket=DATA, Key="prices/p.csv", Body=b'item,price\n"tea",1.5\n')
    succeeded(
        deployment,
        "CREATE EXTERNAL TABLE IF NOT EXISTS prices (item string, price double) "
        f"ROW FORMAT SERDE '{OPEN_CSV}' WITH SERDEPROPERTIES ('separatorChar' = ',') "
        f"LOCATION 's3://{DATA}/prices/' TBLPROPERTIES ('skip.header.line.count' = '1')",
        database=DATABASE,
    )
    table = deployment.client("glue").get_table(DatabaseName=DATABASE, Name="prices")["Table"]
    assert table["StorageDescriptor"]["SerdeInfo"]["SerializationLibrary"] == OPEN_CSV
    assert table["StorageDescriptor"]["Location"] == f"s3://{DATA}/prices/"
    assert table["Parameters"]["skip.header.line.count"] == "1"
    # The declared types, as Athena keeps them: Spark's own Hive table of an OpenCSVSerde has only strings
    # (seen: a stage A CTAS from such a table wrote strings into a double column of the stage table).
    columns = [(column["Name"], column["Type"]) for column in table["StorageDescriptor"]["Columns"]]
    assert columns == [("item", "string"), ("price", "double")]
    execution = succeeded(deployment, "SELECT item, price FROM prices", database=DATABASE)
    assert rows(deployment, execution) == [["item", "price"], ["tea", "1.5"]]
    result = deployment.client("athena").get_query_results(QueryExecutionId=execution["QueryExecutionId"])
    assert [column["Type"] for column in result["ResultSet"]["ResultSetMetadata"]["ColumnInfo"]] == [
        "varchar",
        "double",
    ]


def test_a_date_projected_table_reads_the_folders_of_its_range_that_hold_objects(
    deployment: Deployment, sales: str
) -> None:
    """Partition projection as the lineage archive table uses it (Glue holds no partitions): the query
    reads each ``dt=`` folder of the template within the range; a folder before the range is not read."""
    s3, glue = deployment.client("s3"), deployment.client("glue")
    for day, body in (
        ("2024-03-01", b'{"n": 1}\n'),
        ("2024-03-02", b'{"n": 2}\n{"n": 3}\n'),
        ("2019-12-31", b'{"n": 9}\n'),
    ):
        s3.put_object(Bucket=DATA, Key=f"events/dt={day}/part.json", Body=body)
    glue.create_table(
        DatabaseName=DATABASE,
        TableInput={
            "Name": "events",
            "TableType": "EXTERNAL_TABLE",
            "Parameters": {
                "classification": "json",
                "projection.enabled": "true",
                "projection.dt.type": "date",
                "projection.dt.format": "yyyy-MM-dd",
                "projection.dt.range": "2020-01-01,NOW",
                "storage.location.template": f"s3://{DATA}/events/dt=${{dt}}/",
            },
            "PartitionKeys": [{"Name": "dt", "Type": "string"}],
            "StorageDescriptor": {
                "Columns": [{"Name": "n", "Type": "int"}],
                "Location": f"s3://{DATA}/events/",
                "InputFormat": "org.apache.hadoop.mapred.TextInputFormat",
                "OutputFormat": "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
                "SerdeInfo": {"SerializationLibrary": "org.openx.data.jsonserde.JsonSerDe"},
            },
        },
    )
    execution = succeeded(deployment, "SELECT dt, sum(n) FROM events GROUP BY dt ORDER BY dt", database=DATABASE)
    assert rows(deployment, execution)[1:] == [["2024-03-01", "1"], ["2024-03-02", "5"]]
    assert glue.get_partitions(DatabaseName=DATABASE, TableName="events")["Partitions"] == []


def test_the_partition_version_query_runs_over_the_archive_table_as_the_stack_defines_it(
    deployment: Deployment, sales: str, tmp_path: Path
) -> None:
    """#43: ``athena_queries/lineage/partition_version.sql`` on the archive's Glue table (the CDK stack's
    definition: OpenX JSON SerDe, lowercase struct fields, dt projected) over objects the trace's renderer
    wrote, lines from before versions among them: the answer ``lakeline lineage show`` gives."""
    from harness.versions_archive import DAILY, partition_of, write_history
    from lakeline.commits.versions import parse_version
    from lakeline.lineage.records.archive import LocalArchiveStore
    from lakeline.lineage.records.archive_table import glue_table_input
    from lakeline.lineage.records.query import VERSION_QUERY, bind_version_query
    from lakeline.lineage.records.versions import answer, archive_nodes, partition_versions

    store = LocalArchiveStore(tmp_path / "archive")
    write_history(store, partitions=3, versions=3, legacy=1)
    s3 = deployment.client("s3")
    for key in store.keys("dt="):
        s3.put_object(Bucket=DATA, Key=f"lineage-archive/{key}", Body=store.get(key) or b"")
    deployment.client("glue").create_table(
        DatabaseName=DATABASE, TableInput=glue_table_input("lineage_archive", f"s3://{DATA}/lineage-archive/")
    )
    nodes = archive_nodes(store)
    for partition, asked in ((partition_of(1), ""), (partition_of(2), "v2"), (partition_of(0), "")):
        sql = bind_version_query(VERSION_QUERY.read_text(), DAILY, partition, asked, database=DATABASE)
        got = rows(deployment, succeeded(deployment, sql))
        header, found = got[0], [dict(zip(got[0], row, strict=True)) for row in got[1:]]
        assert header[:7] == [
            "version",
            "location",
            "job_name",
            "run_id",
            "recorded_at",
            "version_before",
            "version_after",
        ]
        versions = partition_versions(nodes, DAILY, partition)
        if not versions:  # archived before versions: no key in its lines, NULL in the table
            assert found == []
            continue
        shown = answer(versions, DAILY, partition, parse_version(asked) if asked else None)
        [row] = found
        assert (row["version"], row["location"]) == (shown.version.token, shown.version.location)
        assert row["version_before"] == (shown.before.token if shown.before else None)
        assert row["version_after"] == (shown.after.token if shown.after else None)
        [read] = shown.version.inputs
        assert (row["input_dataset"], row["input_version"]) == (read.dataset, read.version)
        assert [row["raw_file"]] == shown.version.raw_files


# --- what Athena refuses and Spark would run, and Athena's semantics where Spark's differ (#36) ---------


def test_an_insert_into_a_bucketed_table_is_refused_and_writes_nothing(deployment: Deployment, sales: str) -> None:
    location = f"s3://{DATA}/bucketed/run=1/"
    succeeded(
        deployment,
        f"CREATE TABLE bucketed WITH (format = 'PARQUET', external_location = '{location}', "
        "bucketed_by = ARRAY['id'], bucket_count = 2) AS SELECT id, item FROM sales",
        database=DATABASE,
    )
    files = keys(deployment, DATA, "bucketed/")
    failed = run(deployment, "INSERT INTO bucketed SELECT 9, 'jam'", database=DATABASE)
    assert failed["Status"]["State"] == "FAILED"
    reason = failed["Status"]["StateChangeReason"]
    assert reason.startswith("NOT_SUPPORTED: Inserting into a bucketed table is not supported"), reason
    assert keys(deployment, DATA, "bucketed/") == files
    found = rows(deployment, succeeded(deployment, f"SELECT count(*) FROM {DATABASE}.bucketed"))
    assert found[1:] == [["2"]]


def test_a_ctas_into_a_location_that_holds_an_object_is_refused_as_athena_refuses_it(
    deployment: Deployment, sales: str
) -> None:
    s3 = deployment.client("s3")
    s3.put_object(Bucket=DATA, Key="occupied/left-over.parquet", Body=b"not ours")
    location = f"s3://{DATA}/occupied/"
    failed = run(
        deployment,
        f"CREATE TABLE occupied WITH (format = 'PARQUET', external_location = '{location}') AS SELECT id FROM sales",
        database=DATABASE,
    )
    assert failed["Status"]["State"] == "FAILED"
    assert failed["Status"]["StateChangeReason"] == (
        f"HIVE_PATH_ALREADY_EXISTS: Target directory for table '{DATABASE}.occupied' already exists: {location}. "
        f"You may need to manually clean the data at location '{location}' before retrying. "
        "Athena will not delete data in your account."
    )
    assert keys(deployment, DATA, "occupied/") == ["occupied/left-over.parquet"]
    with pytest.raises(deployment.client("glue").exceptions.EntityNotFoundException):
        deployment.client("glue").get_table(DatabaseName=DATABASE, Name="occupied")


def test_a_statement_writing_more_than_100_partitions_is_refused_and_writes_nothing(
    deployment: Deployment, sales: str
) -> None:
    numbers = "FROM UNNEST(sequence(1, {last})) AS t(n)"
    location = f"s3://{DATA}/many/"
    ctas = (
        f"CREATE TABLE many WITH (format = 'PARQUET', external_location = '{location}', "
        "partitioned_by = ARRAY['part']) AS SELECT n, CAST(n AS VARCHAR) AS part "
    )
    too_many = "HIVE_TOO_MANY_OPEN_PARTITIONS: Exceeded limit of 100 open writers for partitions/buckets"
    failed = run(deployment, ctas + numbers.format(last=101), database=DATABASE)
    assert failed["Status"]["State"] == "FAILED"
    assert failed["Status"]["StateChangeReason"] == too_many
    assert keys(deployment, DATA, "many/") == []

    succeeded(deployment, ctas + numbers.format(last=2), database=DATABASE)
    written = keys(deployment, DATA, "many/")
    insert = "INSERT INTO many SELECT n, CAST(n + 200 AS VARCHAR) " + numbers.format(last=101)
    failed = run(deployment, insert, database=DATABASE)
    assert failed["Status"]["State"] == "FAILED"
    assert failed["Status"]["StateChangeReason"] == too_many
    assert keys(deployment, DATA, "many/") == written
    assert len(deployment.client("glue").get_partitions(DatabaseName=DATABASE, TableName="many")["Partitions"]) == 2


CAST = "SELECT CAST('abc' AS INTEGER) AS n"
DIVISION = "SELECT 7 / 0 AS q"


def test_an_invalid_cast_and_a_division_by_zero_fail_on_athena_and_give_null_on_the_spark_engine(
    deployment: Deployment, local_athena: LocalAthena
) -> None:
    """The same statements: Athena (Trino) fails them; the spark engine, as Glue 5.0's Spark 3.5 with ANSI
    mode off, gives NULL; PySpark 4's own default (ANSI on) would fail them on both."""
    for sql, athena_error in ((CAST, "CAST_INVALID_INPUT"), (DIVISION, "DIVIDE_BY_ZERO")):
        failed = run(deployment, sql)
        assert failed["Status"]["State"] == "FAILED", sql
        assert athena_error in failed["Status"]["StateChangeReason"]
        assert local_athena.engine.execute(sql).rows == [(None,)]


def test_engines_with_different_semantics_on_one_session_at_once_each_keep_their_own(
    deployment: Deployment, local_athena: LocalAthena
) -> None:
    """The local Athena's worker and another thread share the SparkSession: each statement runs with its
    own engine's settings, never the other's."""
    import threading

    spark_results: list[Any] = []

    def spark_side() -> None:
        for _ in range(15):
            spark_results.append(local_athena.engine.execute(CAST).rows)

    thread = threading.Thread(target=spark_side)
    thread.start()
    states = [run(deployment, CAST)["Status"]["State"] for _ in range(5)]
    thread.join()
    assert states == ["FAILED"] * 5
    assert spark_results == [[(None,)]] * 15


# Each SerDe Athena's DDL names for the formats Lakeline reads and writes: the files of one partition plain,
# of the other gzip (by name, as Athena reads text; the codec inside, for columnar files).
ROWS = [(1, "tea, green", 2.5), (2, "cake", 4.0), (3, "jam", 1.25)]
SERDES = {
    "openx_json": ("ROW FORMAT SERDE 'org.openx.data.jsonserde.JsonSerDe'", "json"),
    "hive_json": ("ROW FORMAT SERDE 'org.apache.hive.hcatalog.data.JsonSerDe'", "json"),
    "open_csv": (
        f"ROW FORMAT SERDE '{OPEN_CSV}' WITH SERDEPROPERTIES ('separatorChar' = ',', 'quoteChar' = '\"') "
        "STORED AS TEXTFILE",
        "csv",
    ),
    "lazy_simple": ("ROW FORMAT DELIMITED FIELDS TERMINATED BY '|' STORED AS TEXTFILE", "txt"),
    "parquet": ("STORED AS PARQUET", "parquet"),
    "orc": ("STORED AS ORC", "orc"),
}


def _format_files(spark_engine: SparkEngine, folder: Path, kind: str) -> dict[str, bytes]:
    """The partitions' files (``p=1`` plain, ``p=2`` compressed), each holding ``ROWS`` split in two."""
    import gzip

    halves = {"1": ROWS[:2], "2": ROWS[2:]}
    if kind in {"json", "csv", "txt"}:
        lines = {
            "json": lambda r: json.dumps({"id": r[0], "item": r[1], "amount": r[2]}),
            "csv": lambda r: f'{r[0]},"{r[1]}",{r[2]}',
            "txt": lambda r: f"{r[0]}|{r[1]}|{r[2]}",
        }[kind]
        header = "id,item,amount\n" if kind == "csv" else ""
        texts = {p: (header + "".join(lines(r) + "\n" for r in rows)).encode() for p, rows in halves.items()}
        return {f"p=1/a.{kind}": texts["1"], f"p=2/b.{kind}.gz": gzip.compress(texts["2"])}
    files: dict[str, bytes] = {}
    for part, codec in (("1", "none"), ("2", "gzip" if kind == "parquet" else "zlib")):
        frame = spark_engine.session.createDataFrame(halves[part], "id bigint, item string, amount double")
        written = folder / kind / part
        frame.coalesce(1).write.format(kind).option("compression", codec).save(str(written))
        (data,) = [path for path in written.iterdir() if path.name.startswith("part-")]
        files[f"p={part}/{data.name}"] = data.read_bytes()
    return files


@pytest.mark.parametrize("serde", sorted(SERDES))
def test_athena_ddl_of_each_serde_goes_to_glue_and_its_plain_and_gzip_files_are_read(
    deployment: Deployment,
    sales: str,
    spark_engine: SparkEngine,
    tmp_path: Path,
    serde: str,
) -> None:
    """``CREATE EXTERNAL TABLE ... ROW FORMAT SERDE`` / ``STORED AS`` is written into Glue as Athena writes
    it, whatever the SerDe's class (Spark has no OpenX JSON SerDe: its Hive DDL failed with
    ClassNotFoundException, #36), and each table reads its rows from its plain and compressed files."""
    storage, kind = SERDES[serde]
    s3, glue = deployment.client("s3"), deployment.client("glue")
    for key, body in _format_files(spark_engine, tmp_path, kind).items():
        s3.put_object(Bucket=DATA, Key=f"formats/{serde}/{key}", Body=body)
    header = " TBLPROPERTIES ('skip.header.line.count' = '1')" if kind == "csv" else ""
    succeeded(
        deployment,
        f"CREATE EXTERNAL TABLE IF NOT EXISTS {serde} (id bigint, item string, amount double) "
        f"PARTITIONED BY (p string) {storage} LOCATION 's3://{DATA}/formats/{serde}/'{header}",
        database=DATABASE,
    )
    descriptor = glue.get_table(DatabaseName=DATABASE, Name=serde)["Table"]["StorageDescriptor"]
    library = descriptor["SerdeInfo"]["SerializationLibrary"]
    expected_library = storage.split("'")[1] if storage.startswith("ROW FORMAT SERDE") else None
    assert library == (expected_library or {"txt": LAZY_SIMPLE, "parquet": PARQUET_SERDE, "orc": ORC_SERDE}[kind])
    assert [(c["Name"], c["Type"]) for c in descriptor["Columns"]] == [
        ("id", "bigint"),
        ("item", "string"),
        ("amount", "double"),
    ]
    for part in ("1", "2"):
        succeeded(
            deployment,
            f"ALTER TABLE {serde} ADD IF NOT EXISTS PARTITION (p = '{part}') "
            f"LOCATION 's3://{DATA}/formats/{serde}/p={part}/'",
            database=DATABASE,
        )
    execution = succeeded(deployment, f"SELECT id, item, amount, p FROM {serde} ORDER BY id", database=DATABASE)
    assert rows(deployment, execution)[1:] == [
        [str(i), item, str(amount), "1" if i < 3 else "2"] for i, item, amount in ROWS
    ]
    # Again, unchanged, as a second statement finds it: nothing is created twice.
    succeeded(
        deployment,
        f"CREATE EXTERNAL TABLE IF NOT EXISTS {serde} (id bigint) {storage} LOCATION 's3://{DATA}/x/'",
        database=DATABASE,
    )
    assert len(glue.get_table(DatabaseName=DATABASE, Name=serde)["Table"]["StorageDescriptor"]["Columns"]) == 3


def test_a_malformed_json_line_fails_the_query_unless_the_openx_serde_is_told_to_ignore_it(
    deployment: Deployment, sales: str
) -> None:
    """As Athena's JSON SerDes: a line they cannot read fails the query; OpenX's ``ignore.malformed.json``
    reads it as a row of NULLs. A table already there fails a CREATE without IF NOT EXISTS."""
    deployment.client("s3").put_object(Bucket=DATA, Key="broken/x.json", Body=b'{"n": 1}\n{"n": \n')
    openx = "ROW FORMAT SERDE 'org.openx.data.jsonserde.JsonSerDe'"
    location = f"LOCATION 's3://{DATA}/broken/'"
    succeeded(deployment, f"CREATE EXTERNAL TABLE strict_json (n int) {openx} {location}", database=DATABASE)
    failed = run(deployment, "SELECT n FROM strict_json", database=DATABASE)
    assert failed["Status"]["State"] == "FAILED", failed["Status"]
    succeeded(
        deployment,
        f"CREATE EXTERNAL TABLE lenient_json (n int) {openx} "
        f"WITH SERDEPROPERTIES ('ignore.malformed.json' = 'true') {location}",
        database=DATABASE,
    )
    execution = succeeded(deployment, "SELECT n FROM lenient_json ORDER BY n", database=DATABASE)
    assert rows(deployment, execution)[1:] == [["1"], [None]]
    again = run(deployment, f"CREATE EXTERNAL TABLE strict_json (n int) {openx} {location}", database=DATABASE)
    assert again["Status"]["State"] == "FAILED"
    assert "already exists" in again["Status"]["StateChangeReason"]


def test_an_unpartitioned_table_published_at_a_run_prefix_keeps_exactly_its_declared_columns(
    deployment: Deployment, sales: str
) -> None:
    """Stage A publishes an unpartitioned table by a CTAS into ``<root>/lakeline_run=<token>/`` and
    ``ALTER TABLE ... SET LOCATION`` there (``swap_statements``). Athena's SET LOCATION never adds a column;
    Spark, making the table over ``<root>`` (which by then holds the ``lakeline_run=`` folder), inferred a
    ``lakeline_run`` column and it was written back to Glue (#36)."""
    from lakeline.partitions import swap_statements

    root = f"s3://{DATA}/stores/"
    succeeded(
        deployment,
        f"CREATE EXTERNAL TABLE IF NOT EXISTS stores (store string, region string) STORED AS PARQUET LOCATION '{root}'",
        database=DATABASE,
    )
    for token in ("first", "second"):
        succeeded(
            deployment,
            f"CREATE TABLE stores_{token} WITH (format = 'PARQUET', external_location = '{root}lakeline_run={token}/') "
            f"AS SELECT item AS store, 'east' AS region FROM {sales}",
            database=DATABASE,
        )
        (swap,) = swap_statements(DATABASE, "stores", {}, f"{root}lakeline_run={token}/")
        succeeded(deployment, swap)
        succeeded(deployment, f"DROP TABLE stores_{token}", database=DATABASE)
        table = deployment.client("glue").get_table(DatabaseName=DATABASE, Name="stores")["Table"]
        assert [column["Name"] for column in table["StorageDescriptor"]["Columns"]] == ["store", "region"]
        assert table["PartitionKeys"] == []
        assert table["StorageDescriptor"]["Location"] == f"{root}lakeline_run={token}/"
        found = rows(deployment, succeeded(deployment, f"SELECT * FROM {DATABASE}.stores ORDER BY store"))
        assert found == [["store", "region"], ["cake", "east"], ["tea, green", "east"]]


def test_describe_show_create_table_show_partitions_and_show_columns_answer_from_glue_as_athena_does(
    deployment: Deployment, sales: str
) -> None:
    """Through the local Athena DESCRIBE printed nothing (no result columns) and SHOW CREATE TABLE / SHOW
    PARTITIONS failed ("not supported on Spark"); Athena answers each from its catalog (#36)."""
    described = succeeded(deployment, f"DESCRIBE {sales}")
    assert described["StatementType"] == "UTILITY"
    result = deployment.client("athena").get_query_results(QueryExecutionId=described["QueryExecutionId"])
    assert [c["Name"] for c in result["ResultSet"]["ResultSetMetadata"]["ColumnInfo"]] == [
        "col_name",
        "data_type",
        "comment",
    ]
    assert rows(deployment, described) == [
        ["id", "bigint", ""],
        ["item", "string", ""],
        ["amount", "double", ""],
        ["date", "string", ""],
        ["", "", ""],
        ["# Partition Information", "", ""],
        ["# col_name", "data_type", "comment"],
        ["", "", ""],
        ["date", "string", ""],
    ]
    assert rows(deployment, succeeded(deployment, f"SHOW PARTITIONS {sales}")) == [["date=20240301"]]
    assert rows(deployment, succeeded(deployment, "SHOW COLUMNS IN sales", database=DATABASE)) == [
        ["id"],
        ["item"],
        ["amount"],
        ["date"],
    ]
    shown = [row[0] for row in rows(deployment, succeeded(deployment, f"SHOW CREATE TABLE {sales}"))]
    assert shown[:3] == [f"CREATE EXTERNAL TABLE `{DATABASE}`.`sales`(", "  `id` bigint, ", "  `item` string, "]
    assert f"  's3://{DATA}/sales/'" in shown and "PARTITIONED BY ( " in shown
    # The DDL Athena answers makes the same table again.
    again = "\n".join(shown).replace(f"`{DATABASE}`.`sales`", f"`{DATABASE}`.`sales_again`")
    succeeded(deployment, again)
    glue = deployment.client("glue")
    original, copy = (glue.get_table(DatabaseName=DATABASE, Name=name)["Table"] for name in ("sales", "sales_again"))
    assert copy["PartitionKeys"] == original["PartitionKeys"]
    assert {k: v for k, v in copy["Parameters"].items() if k != "EXTERNAL"} == original["Parameters"]
    for key in ("Columns", "Location", "SerdeInfo", "InputFormat", "OutputFormat"):
        assert copy["StorageDescriptor"][key] == original["StorageDescriptor"][key], key
    failed = run(deployment, f"DESCRIBE FORMATTED {sales}")
    assert failed["Status"]["State"] == "FAILED"
    assert "DESCRIBE FORMATTED" in failed["Status"]["StateChangeReason"]
    missing = run(deployment, f"DESCRIBE {DATABASE}.no_such_table")
    assert "Table not found local_athena_sales.no_such_table" in missing["Status"]["StateChangeReason"]


def test_a_json_table_reads_keys_in_any_case_and_zoned_timestamps_are_typed_and_written_as_athena_s(
    deployment: Deployment, sales: str
) -> None:
    """As the lineage archive's table and the seed's query over it (#42): Glue lowercases struct fields
    (``recordedat``), the files spell them as written (``recordedAt``), and Athena's JSON SerDes match keys
    in any case; a key written after the table was first read is read too. ``from_unixtime`` (and the other
    functions that return a ``timestamp with time zone``) give that type and Trino's text, which pyathena
    converts to an aware datetime; a plain timestamp stays ``timestamp``."""
    s3 = deployment.client("s3")
    s3.put_object(Bucket=DATA, Key="steps/a.json", Body=b'{"id": "a", "steps": [{"action": "in"}]}\n')
    openx = "ROW FORMAT SERDE 'org.openx.data.jsonserde.JsonSerDe'"
    succeeded(
        deployment,
        "CREATE EXTERNAL TABLE steps (id string, steps array<struct<action:string,recordedAt:bigint>>) "
        f"{openx} LOCATION 's3://{DATA}/steps/'",
        database=DATABASE,
    )
    query = (
        "SELECT id, s.action, s.recordedAt AS seconds, from_unixtime(s.recordedAt) AS recordedAt "
        "FROM steps CROSS JOIN UNNEST(steps) WITH ORDINALITY AS t (s, step) ORDER BY id"
    )
    assert rows(deployment, succeeded(deployment, query, database=DATABASE))[1:] == [["a", "in", None, None]]
    s3.put_object(
        Bucket=DATA, Key="steps/b.json", Body=b'{"id": "b", "steps": [{"action": "out", "recordedAt": 1700000000}]}\n'
    )
    execution = succeeded(deployment, query, database=DATABASE)
    assert rows(deployment, execution)[1:] == [
        ["a", "in", None, None],
        ["b", "out", "1700000000", "2023-11-14 22:13:20.000 UTC"],
    ]
    result = deployment.client("athena").get_query_results(QueryExecutionId=execution["QueryExecutionId"])
    assert [(c["Name"], c["Type"]) for c in result["ResultSet"]["ResultSetMetadata"]["ColumnInfo"]] == [
        ("id", "varchar"),
        ("action", "varchar"),
        ("seconds", "bigint"),
        ("recordedAt", "timestamp with time zone"),
    ]

    zoned = (
        "SELECT from_unixtime(1700000000) AS a, current_timestamp AS b, now() AS c, "
        "from_iso8601_timestamp('2024-03-01T10:00:00Z') AS d, TIMESTAMP '2024-03-01 10:00:00 UTC' AS e, "
        "TIMESTAMP '2024-03-01 10:00:00' AS plain"
    )
    execution = succeeded(deployment, zoned)
    result = deployment.client("athena").get_query_results(QueryExecutionId=execution["QueryExecutionId"])
    kinds = [c["Type"] for c in result["ResultSet"]["ResultSetMetadata"]["ColumnInfo"]]
    assert kinds == ["timestamp with time zone"] * 5 + ["timestamp"]
    (values,) = rows(deployment, execution)[1:]
    assert values[0] == "2023-11-14 22:13:20.000 UTC"
    assert values[3:] == ["2024-03-01 10:00:00.000 UTC", "2024-03-01 10:00:00.000 UTC", "2024-03-01 10:00:00.000"]

    cursor = pyathena_cursor(deployment)
    cursor.execute(query)
    utc = datetime.UTC
    assert cursor.fetchall() == [
        ("a", "in", None, None),
        ("b", "out", 1700000000, datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=utc)),
    ]
    cursor.execute(zoned)
    (row,) = cursor.fetchall()
    now = datetime.datetime.now(utc)
    assert all(isinstance(value, datetime.datetime) and value.utcoffset() is not None for value in row[:5])
    assert abs(now - row[1]).total_seconds() < 600 and abs(now - row[2]).total_seconds() < 600
    assert row[5] == datetime.datetime(2024, 3, 1, 10, 0)
