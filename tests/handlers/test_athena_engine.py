"""AthenaEngine against moto's Athena: the calls it makes, waiting, throttling and typed errors.

moto runs every query to SUCCEEDED and returns canned rows; FAILED is set on moto's own execution
record, and throttling is injected into the real (moto-backed) client with a botocore event hook.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws, settings
from moto.athena.models import athena_backends
from moto.core import DEFAULT_ACCOUNT_ID
from moto.moto_api import state_manager

from lakeline.engines.athena import AthenaEngine, AthenaSettings
from lakeline.engines.base import QueryCancelled, QueryFailed, QueryTimedOut, TableNotFound

REGION = "us-east-1"


class FakeClock:
    """Time under the test's control, so waiting is tested without waiting."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield
    state_manager.unset_transition("athena::execution")


@pytest.fixture
def athena(aws: None) -> Any:
    client = boto3.client("athena", region_name=REGION)
    client.create_work_group(
        Name="lakeline",
        Configuration={"ResultConfiguration": {"OutputLocation": "s3://results/"}},
    )
    return client


def engine_for(client: Any, clock: FakeClock, **overrides: Any) -> AthenaEngine:
    options = {"workgroup": "lakeline", "output_location": "s3://results/lakeline/", **overrides}
    return AthenaEngine(client, AthenaSettings(**options), sleep=clock.sleep, clock=clock)


def test_statement_runs_in_the_workgroup_with_its_database(athena: Any) -> None:
    clock = FakeClock()
    result = engine_for(athena, clock).execute("DROP TABLE IF EXISTS `db`.`t`", database="db")
    execution = athena.get_query_execution(QueryExecutionId=result.query_id)["QueryExecution"]
    assert execution["Query"] == "DROP TABLE IF EXISTS `db`.`t`"
    assert execution["WorkGroup"] == "lakeline"
    assert execution["QueryExecutionContext"] == {"Catalog": "AwsDataCatalog", "Database": "db"}
    assert execution["ResultConfiguration"]["OutputLocation"].startswith("s3://results/lakeline/")
    assert result.rows == []


def test_select_returns_rows_without_the_header_row(athena: Any) -> None:
    rows = [{"Data": [{"VarCharValue": "n"}]}, {"Data": [{"VarCharValue": "42"}]}]
    column_info = [{"Name": "n", "Type": "bigint", "CatalogName": "c", "SchemaName": "s", "TableName": "t"}]
    backend = athena_backends[DEFAULT_ACCOUNT_ID][REGION]
    if settings.TEST_SERVER_MODE:  # pragma: no cover - the suite runs in-process
        pytest.skip("canned results are set on the in-process backend")
    from moto.athena.models import QueryResults

    backend.query_results_queue.append(QueryResults(rows=rows, column_info=column_info))
    result = engine_for(athena, FakeClock()).execute("SELECT count(*) AS n FROM t")
    assert result.columns == ["n"]
    assert result.rows == [("42",)]


def test_waits_through_queued_and_running_with_growing_delays(athena: Any) -> None:
    state_manager.set_transition("athena::execution", {"progression": "manual", "times": 3})
    clock = FakeClock()
    # A cap the waits reach within the run, so both the growth and the cap are seen.
    initial, cap = 0.2, 1.0
    engine_for(athena, clock, poll_initial_seconds=initial, poll_max_seconds=cap).execute("SELECT 1")
    sleeps = clock.sleeps
    assert len(sleeps) >= 4 and sleeps[0] == initial
    # Each wait is longer than the one before until the cap, then stays at the cap.
    for before, after in pairwise(sleeps):
        assert after > before or before == after == cap, sleeps
    assert max(sleeps) == cap, sleeps


def inject_throttling(client: Any, operation: str, times: int) -> list[int]:
    calls = [0]

    def throttle(**_: Any) -> None:
        calls[0] += 1
        if calls[0] <= times:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, operation)

    client.meta.events.register(f"before-call.athena.{operation}", throttle)
    return calls


def test_throttled_calls_are_retried_with_backoff(athena: Any) -> None:
    start_calls = inject_throttling(athena, "StartQueryExecution", times=2)
    poll_calls = inject_throttling(athena, "GetQueryExecution", times=3)
    clock = FakeClock()
    result = engine_for(athena, clock).execute("SELECT 1")
    assert result.query_id
    assert start_calls[0] == 3
    assert poll_calls[0] >= 4
    assert len(clock.sleeps) >= 5


def test_throttling_that_never_ends_is_raised(athena: Any) -> None:
    inject_throttling(athena, "StartQueryExecution", times=100)
    with pytest.raises(ClientError, match="Rate exceeded"):
        engine_for(athena, FakeClock(), max_throttle_retries=3).execute("SELECT 1")


def test_failed_query_raises_query_failed(athena: Any) -> None:
    state_manager.set_transition("athena::execution", {"progression": "manual", "times": 100})
    engine = engine_for(athena, FakeClock())
    query_id = engine.start("SELECT nope FROM t")
    athena_backends[DEFAULT_ACCOUNT_ID][REGION].executions[query_id].status = "FAILED"
    with pytest.raises(QueryFailed, match=f"Athena query {query_id} failed") as error:
        engine.wait(query_id, sql="SELECT nope FROM t")
    assert error.value.query_id == query_id
    assert error.value.sql == "SELECT nope FROM t"


def test_cancelled_query_raises_instead_of_waiting_forever(athena: Any) -> None:
    state_manager.set_transition("athena::execution", {"progression": "manual", "times": 100})
    clock = FakeClock()
    engine = engine_for(athena, clock)
    query_id = engine.start("SELECT 1")
    athena.stop_query_execution(QueryExecutionId=query_id)
    with pytest.raises(QueryCancelled):
        engine.wait(query_id)
    assert clock.sleeps == []


def test_query_that_never_finishes_times_out_and_is_stopped(athena: Any) -> None:
    state_manager.set_transition("athena::execution", {"progression": "manual", "times": 10_000})
    clock = FakeClock()
    engine = engine_for(athena, clock, timeout_seconds=30)
    with pytest.raises(QueryTimedOut, match="did not finish in 30s") as error:
        engine.execute("SELECT 1")
    assert clock.now >= 30
    stopped = athena.get_query_execution(QueryExecutionId=error.value.query_id)
    assert stopped["QueryExecution"]["Status"]["State"] == "CANCELLED"


def test_a_deadline_stops_queries_before_it_then_gives_each_later_query_its_grace(athena: Any) -> None:
    """The quality function's engine (``deadline``: its own timeout less a clean end): the check running at the
    deadline is stopped there, and the cleanup query after it still has ``DEADLINE_GRACE_SECONDS``."""
    state_manager.set_transition("athena::execution", {"progression": "manual", "times": 10_000})
    clock = FakeClock()
    options = {"workgroup": "lakeline", "output_location": "s3://results/lakeline/"}
    engine = AthenaEngine(athena, AthenaSettings(**options), sleep=clock.sleep, clock=clock, deadline=100.0)
    with pytest.raises(QueryTimedOut, match="did not finish before the function's own timeout"):
        engine.execute("SELECT 1")
    assert 100 <= clock.now < 100 + 5  # at the deadline (one poll's sleep at most), not 1,800 s later
    with pytest.raises(QueryTimedOut):
        engine.execute("DROP TABLE IF EXISTS `db`.`t`")
    assert 130 <= clock.now < 130 + 10


def test_describe_table_reads_the_glue_catalog(athena: Any) -> None:
    glue = boto3.client("glue", region_name=REGION)
    glue.create_database(DatabaseInput={"Name": "engineering_mysql_raw_dev"})
    glue.create_table(
        DatabaseName="engineering_mysql_raw_dev",
        TableInput={
            "Name": "customers",
            "StorageDescriptor": {
                "Columns": [{"Name": "customer_id", "Type": "bigint"}, {"Name": "name", "Type": "string"}],
                "Location": "s3://raw/engineering/mysql/customers",
            },
            "PartitionKeys": [{"Name": "date", "Type": "string"}],
        },
    )
    engine = AthenaEngine(athena, glue=glue)
    schema = engine.describe_table("engineering_mysql_raw_dev", "customers")
    assert schema.column_names == ["customer_id", "name"]
    assert schema.partition_names == ["date"]
    assert schema.location == "s3://raw/engineering/mysql/customers/"
    with pytest.raises(TableNotFound):
        engine.describe_table("engineering_mysql_raw_dev", "missing")
