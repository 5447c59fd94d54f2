"""Athena acts with its caller's credentials (``lakeline.runtimes.deployed.local_aws.athena_caller``, #20): a query
reads Glue and S3, and writes its result file and a CTAS's or an INSERT's files, as the principal that started it.
A role allowed to start queries but not to read a table's Glue entry, or to write where the query writes,
has its query failed with Athena's kind of reason, as in AWS; what it is granted goes through."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from lakeline.runtimes.deployed.local_aws import iam
from lakeline.runtimes.deployed.local_aws.athena import LocalAthena
from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from tests.rehearsal.test_local_athena import rows

pytestmark = pytest.mark.spark

DATA, RESULTS = "lakeline-athena-caller-data", "lakeline-athena-caller-results"
DATABASE, ROLE = "athena_caller", "lakeline-test-athena-caller"
OUTPUT = f"s3://{RESULTS}/queries/"
ALLOWED: list[dict[str, Any]] = [
    {"Effect": "Allow", "Action": ["athena:StartQueryExecution", "athena:GetQuery*"], "Resource": "*"},
    {"Effect": "Allow", "Action": ["glue:GetTable", "glue:GetPartitions", "glue:GetDatabase"], "Resource": "*"},
    {"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"], "Resource": "*"},
    {"Effect": "Allow", "Action": ["s3:PutObject"], "Resource": f"arn:aws:s3:::{RESULTS}/queries/*"},
]


@pytest.fixture(scope="module")
def table(deployment: Deployment, local_athena: LocalAthena) -> str:
    s3, glue = deployment.client("s3"), deployment.client("glue")
    for bucket in (DATA, RESULTS):
        with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
            s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=DATA, Key="prices/a.json", Body=b'{"item": "tea", "price": 2.5}\n')
    glue.create_database(DatabaseInput={"Name": DATABASE})
    glue.create_table(
        DatabaseName=DATABASE,
        TableInput={
            "Name": "prices",
            "TableType": "EXTERNAL_TABLE",
            "StorageDescriptor": {
                "Columns": [{"Name": "item", "Type": "string"}, {"Name": "price", "Type": "double"}],
                "Location": f"s3://{DATA}/prices/",
                "InputFormat": "org.apache.hadoop.mapred.TextInputFormat",
                "OutputFormat": "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
                "SerdeInfo": {"SerializationLibrary": "org.openx.data.jsonserde.JsonSerDe"},
            },
        },
    )
    role = deployment.client("iam").create_role(RoleName=ROLE, AssumeRolePolicyDocument=json.dumps({"Statement": []}))
    return str(role["Role"]["Arn"])


@contextlib.contextmanager
def allowed(deployment: Deployment, statements: list[dict[str, Any]]) -> Iterator[Any]:
    """An Athena client signed as the test role, whose one policy is ``statements``."""
    document = {"Version": "2012-10-17", "Statement": statements}
    client = deployment.client("iam")
    client.put_role_policy(RoleName=ROLE, PolicyName="athena", PolicyDocument=json.dumps(document))
    arn = client.get_role(RoleName=ROLE)["Role"]["Arn"]
    credentials = iam.role_credentials(deployment.account, deployment.region, arn, "athena-caller")
    yield deployment.client("athena", credentials=credentials)


def run(athena: Any, sql: str, output: str = OUTPUT) -> dict[str, Any]:
    """Start ``sql`` as the client's signer and wait for its end."""
    started = athena.start_query_execution(QueryString=sql, ResultConfiguration={"OutputLocation": output})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        execution: dict[str, Any] = athena.get_query_execution(QueryExecutionId=started["QueryExecutionId"])[
            "QueryExecution"
        ]
        if execution["Status"]["State"] in {"SUCCEEDED", "FAILED", "CANCELLED"}:
            return execution
        time.sleep(0.02)
    raise AssertionError(f"the query did not end: {sql}")


def test_what_the_caller_is_granted_goes_through(deployment: Deployment, table: str) -> None:
    with allowed(deployment, ALLOWED) as athena:
        execution = run(athena, f"SELECT item, price FROM {DATABASE}.prices")
    assert execution["Status"]["State"] == "SUCCEEDED", execution["Status"]
    assert rows(deployment, execution) == [["item", "price"], ["tea", "2.5"]]


def test_a_table_the_caller_may_not_read_in_glue_fails_the_query(deployment: Deployment, table: str) -> None:
    without_glue = [s for s in ALLOWED if not str(s["Action"]).startswith("['glue:")]
    with allowed(deployment, without_glue) as athena:
        execution = run(athena, f"SELECT item FROM {DATABASE}.prices")
    assert execution["Status"]["State"] == "FAILED"
    reason = execution["Status"]["StateChangeReason"]
    # The catalog is the first resource AWS checks GetTable on: the refusal names it.
    refused = (
        f"assumed-role/{ROLE}/athena-caller is not authorized to perform: glue:GetTable on resource: arn:aws:glue:"
    )
    assert refused in reason, reason


def test_a_result_location_the_caller_may_not_write_fails_the_query(deployment: Deployment, table: str) -> None:
    with allowed(deployment, ALLOWED) as athena:
        execution = run(athena, f"SELECT item FROM {DATABASE}.prices", output=f"s3://{RESULTS}/elsewhere/")
    assert execution["Status"]["State"] == "FAILED"
    reason = execution["Status"]["StateChangeReason"]
    assert reason.startswith(f"Access denied when writing output to url: s3://{RESULTS}/elsewhere/"), reason


def test_a_ctas_where_the_caller_may_not_write_fails_and_writes_nothing(deployment: Deployment, table: str) -> None:
    location = f"s3://{DATA}/copies/"
    creating = [*ALLOWED, {"Effect": "Allow", "Action": "glue:CreateTable", "Resource": "*"}]
    with allowed(deployment, creating) as athena:
        sql = f"CREATE TABLE {DATABASE}.copy WITH (external_location = '{location}') AS SELECT * FROM {DATABASE}.prices"
        execution = run(athena, sql)
    assert execution["Status"]["State"] == "FAILED"
    assert execution["Status"]["StateChangeReason"] == f"Access denied when writing to location: {location}"
    assert "Contents" not in deployment.client("s3").list_objects_v2(Bucket=DATA, Prefix="copies/")
    with allowed(deployment, [*creating, {"Effect": "Allow", "Action": "s3:PutObject", "Resource": "*"}]) as athena:
        assert run(athena, sql)["Status"]["State"] == "SUCCEEDED"
