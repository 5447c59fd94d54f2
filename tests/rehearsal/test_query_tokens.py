"""The local Athena honours ``ClientRequestToken`` as Athena does (#40): a start repeated with the same token and
request gets the query already started, not a second run; the same token with another request is refused. The
state machines' Athena tasks send one derived from the execution and the state
(``stacks.constructs.athena.client_request_token``), so a task that starts its query again gets the first."""

from __future__ import annotations

import time

import pytest
from botocore.exceptions import ClientError

from lakeline.runtimes.deployed.local_aws.athena import LocalAthena
from lakeline.runtimes.deployed.local_aws.deploy import Deployment

pytestmark = pytest.mark.spark

TOKEN = "privy-token-" + "0" * 24  # Athena takes 32 to 128 characters


def _ended(deployment: Deployment, query_id: str) -> str:
    athena = deployment.client("athena")
    while True:
        state = str(athena.get_query_execution(QueryExecutionId=query_id)["QueryExecution"]["Status"]["State"])
        if state in ("SUCCEEDED", "FAILED", "CANCELLED"):
            return state
        time.sleep(0.05)


def test_the_same_token_and_request_start_one_query(deployment: Deployment, local_athena: LocalAthena) -> None:
    athena = deployment.client("athena")
    sql = "SELECT 'privy tokens' AS said"
    first = athena.start_query_execution(QueryString=sql, WorkGroup="lakeline-dev", ClientRequestToken=TOKEN)
    again = athena.start_query_execution(QueryString=sql, WorkGroup="lakeline-dev", ClientRequestToken=TOKEN)
    assert again["QueryExecutionId"] == first["QueryExecutionId"]
    assert _ended(deployment, first["QueryExecutionId"]) == "SUCCEEDED"
    assert [query for query, _ in local_athena.executed].count(sql) == 1
    # Without a token of its own, each start is a query (the SDK makes a new token for each call).
    other = athena.start_query_execution(QueryString=sql, WorkGroup="lakeline-dev")
    assert other["QueryExecutionId"] != first["QueryExecutionId"]
    assert _ended(deployment, other["QueryExecutionId"]) == "SUCCEEDED"


def test_the_same_token_with_another_request_is_refused(deployment: Deployment, local_athena: LocalAthena) -> None:
    athena = deployment.client("athena")
    token = TOKEN.replace("0", "1")
    athena.start_query_execution(QueryString="SELECT 1", WorkGroup="lakeline-dev", ClientRequestToken=token)
    with pytest.raises(ClientError, match=r"InvalidRequestException.*Idempotent parameters do not match"):
        athena.start_query_execution(QueryString="SELECT 2", WorkGroup="lakeline-dev", ClientRequestToken=token)
