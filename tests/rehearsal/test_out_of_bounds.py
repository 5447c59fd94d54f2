"""A stage B step cannot reach a bucket outside the deployment (#40). Stage B SQL comes from teams' dependency
items, and Athena reads and writes S3 as the state machine's role: a step that makes an external table over
another bucket and inserts from it (or into it) would copy data out of (or into) any bucket the role may touch.
The stacks confine that role to Lakeline's buckets (``stacks.constructs.grants.ConfineAthenaTaskGrants``); here,
under IAM enforcement, such a run fails with the refusal named, publishes nothing, leaves the other bucket as it
was and parks its message with the reason, as it would in AWS."""

from __future__ import annotations

import contextlib
import re
from typing import Any

import pytest

from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.executions import ExecutionHost
from tests.rehearsal.support import (
    bucket,
    create_source_tables,
    daily_item,
    parked,
    put_item,
    query,
    stage_b_runs,
    writing,
)

pytestmark = pytest.mark.spark

OUTSIDE = "lakeline-privy-outside"  # a bucket of the same account that the deployment did not create
SECRET = b'{"customer": "c1", "card": "4111"}\n'
SOURCE = "privy_vault_dev.purchases"
DAY = "20240305"


def _item(table: str, steps: list[dict[str, str]], scratch: str) -> dict[str, Any]:
    """``privy_reports_dev.<table>``'s item, fed by the source's day, its steps allowed to write ``scratch``."""
    return {
        **daily_item(f"privy_reports_dev.{table}", "overwrite", steps, source=SOURCE),
        "scratchTables": [f"privy_vault_dev.{scratch}"],
    }


ITEMS = {
    # Reads: an external table over the other bucket, then the target filled from it.
    "stolen": _item(
        "stolen",
        [
            {
                "db": "privy_vault_dev",
                "info": "a table over a bucket the deployment does not own",
                "sql": "CREATE EXTERNAL TABLE IF NOT EXISTS privy_vault_dev.elsewhere (customer STRING, card STRING) "
                "ROW FORMAT SERDE 'org.openx.data.jsonserde.JsonSerDe' "
                f"LOCATION 's3://{OUTSIDE}/secrets/'",
            },
            {
                "db": "privy_vault_dev",
                "info": "its rows copied into the target",
                "sql": "INSERT INTO privy_reports_dev.stolen SELECT customer, card, '$day' FROM elsewhere",
            },
        ],
        "elsewhere",
    ),
    # Writes: an external table in the other bucket, filled from the stage data.
    "leaked": _item(
        "leaked",
        [
            {
                "db": "privy_vault_dev",
                "info": "a table in a bucket the deployment does not own",
                "sql": "CREATE EXTERNAL TABLE IF NOT EXISTS privy_vault_dev.drop_box (order_id BIGINT) "
                f"STORED AS PARQUET LOCATION 's3://{OUTSIDE}/drop/'",
            },
            {
                "db": "privy_vault_dev",
                "info": "the day's orders written there",
                "sql": "INSERT INTO privy_vault_dev.drop_box SELECT order_id FROM purchases WHERE \"date\" = '$day'",
            },
            {
                "db": "privy_vault_dev",
                "info": "and counted into the target",
                "sql": "INSERT INTO privy_reports_dev.leaked SELECT CAST(count(*) AS VARCHAR), '', '$day' "
                "FROM purchases WHERE \"date\" = '$day'",
            },
        ],
        "drop_box",
    ),
}


def _smuggled(analytics: str) -> dict[str, Any]:
    """Reads through a partition: a table in a bucket of the deployment, one of its partitions in the other."""
    return _item(
        "smuggled",
        [
            {
                "db": "privy_vault_dev",
                "info": "a table in the deployment's analytics bucket",
                "sql": "CREATE EXTERNAL TABLE IF NOT EXISTS privy_vault_dev.smuggle (customer STRING, card STRING) "
                "PARTITIONED BY (part STRING) ROW FORMAT SERDE 'org.openx.data.jsonserde.JsonSerDe' "
                f"LOCATION 's3://{analytics}/privy/smuggle/'",
            },
            {
                "db": "privy_vault_dev",
                "info": "a partition of it in the other bucket",
                "sql": "ALTER TABLE privy_vault_dev.smuggle ADD IF NOT EXISTS PARTITION (part = 'x') "
                f"LOCATION 's3://{OUTSIDE}/secrets/'",
            },
            {
                "db": "privy_vault_dev",
                "info": "its rows copied into the target",
                "sql": "INSERT INTO privy_reports_dev.smuggled SELECT customer, card, '$day' FROM smuggle",
            },
        ],
        "smuggle",
    )


def _outside_objects(deployment: Deployment) -> dict[str, bytes]:
    s3 = deployment.client("s3")
    listed = s3.list_objects_v2(Bucket=OUTSIDE).get("Contents", [])
    return {o["Key"]: s3.get_object(Bucket=OUTSIDE, Key=o["Key"])["Body"].read() for o in listed}


@pytest.fixture(scope="module")
def out_of_bounds_runs(deployment: Deployment, executions: ExecutionHost) -> None:
    """One arrival of the source, whose finished partition starts both items' runs."""
    s3 = deployment.client("s3")  # the operator's: the other bucket is someone else's data, made here
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=OUTSIDE)
    s3.put_object(Bucket=OUTSIDE, Key="secrets/cards.json", Body=SECRET)
    orders = [("order_id", "bigint"), ("amount", "double")]
    create_source_tables(deployment, "privy/vault/purchases", orders)  # SOURCE is its stage table
    query(deployment, "CREATE DATABASE IF NOT EXISTS privy_reports_dev")
    analytics = bucket(deployment, "analytics")
    items = [*ITEMS.values(), _smuggled(analytics)]
    for table in [str(item["dataset"]).split(".")[1] for item in items]:
        query(
            deployment,
            f"CREATE EXTERNAL TABLE privy_reports_dev.{table} (customer STRING, card STRING) "
            f"PARTITIONED BY (`date` STRING) STORED AS PARQUET LOCATION 's3://{analytics}/privy/reports/{table}/'",
        )
    for item in items:
        put_item(deployment, item)
    s3.put_object(
        Bucket=bucket(deployment, "raw"),
        Key=f"privy/vault/purchases/date={DAY}/orders.csv",
        Body=b"order_id,amount\n1,2\n",
    )
    executions.wait()


@pytest.mark.parametrize(
    ("table", "failed_step", "refusal"),
    [
        ("stolen", 1, f"Permission denied on S3 path: s3://{OUTSIDE}/secrets/"),
        ("leaked", 1, f"Access denied when writing to location: s3://{OUTSIDE}/drop/"),
        ("smuggled", 2, f"Permission denied on S3 path: s3://{OUTSIDE}/secrets/"),
    ],
)
def test_a_step_reaching_a_bucket_outside_the_deployment_is_refused_and_publishes_nothing(
    deployment: Deployment,
    executions: ExecutionHost,
    out_of_bounds_runs: None,
    table: str,
    failed_step: int,
    refusal: str,
) -> None:
    (run,) = writing(executions, stage_b_runs(deployment, executions, table))
    record = executions.records[run["executionArn"]]
    assert run["status"] == "FAILED", record
    errors = [task.error for task in record.tasks if task.state == "RunStepsStep"]
    assert errors[: failed_step + 1] == [None] * failed_step + ["States.TaskFailed"], errors
    (reason,) = [
        r for body, r in parked(deployment, "StageBDeadLetterQueueUrl").items() if f"privy_reports_dev.{table}" in body
    ]
    assert reason.startswith("steps failed: States.TaskFailed: ") and refusal in reason, reason
    # Nothing published: the target has no partition and no rows.
    assert query(deployment, f"SHOW PARTITIONS privy_reports_dev.{table}") == []
    assert query(deployment, f"SELECT count(*) FROM privy_reports_dev.{table}") == [["0"]]
    # The other bucket is as it was: nothing written into it, nothing taken out of it.
    assert _outside_objects(deployment) == {"secrets/cards.json": SECRET}
    analytics = bucket(deployment, "analytics")
    left = deployment.client("s3").list_objects_v2(Bucket=analytics, Prefix=f"privy/reports/{table}/")
    assert [o["Key"] for o in left.get("Contents", [])] == []


def test_each_query_of_the_runs_was_started_with_a_token_of_its_own(
    deployment: Deployment, executions: ExecutionHost, out_of_bounds_runs: None
) -> None:
    """The tokens the interpreter computed from the synthesized definitions (``States.Hash`` of the execution, the
    state and the iteration): 64 hexadecimal characters, one per query of every run."""
    tokens = [
        task.input["ClientRequestToken"]
        for table in ["stolen", "leaked"]
        for run in stage_b_runs(deployment, executions, table)
        for task in executions.records[run["executionArn"]].tasks
        if task.resource.endswith(":athena:startQueryExecution.sync")
    ]
    assert len(tokens) >= 4 and all(re.fullmatch(r"[0-9a-f]{64}", token) for token in tokens), tokens
    assert len(set(tokens)) == len(tokens)
