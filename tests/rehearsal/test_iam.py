"""IAM on the rehearsal's endpoint (``lakeline.runtimes.deployed.local_aws.iam``): each function acts with its own
synthesized role's credentials and is refused what that role is not granted, as in AWS; and the gaps
of moto's evaluation, documented here so that a moto that closes one fails this test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.functions import FunctionHost
from tests.rehearsal.support import output


def _router(functions: FunctionHost) -> str:
    (name,) = [name for name in functions.functions if "-StageARouter" in name]
    return name


def test_a_function_acts_with_its_own_role_and_is_refused_what_it_is_not_granted(
    deployment: Deployment, functions: FunctionHost
) -> None:
    credentials = functions.environments[_router(functions)].credentials
    assert credentials is not None and credentials.session_token
    dynamodb = deployment.client("dynamodb", credentials=credentials)
    with pytest.raises(ClientError, match="is not authorized to perform: dynamodb:DeleteTable"):
        dynamodb.delete_table(TableName=output(deployment, "DependenciesTable"))
    sfn = deployment.client("stepfunctions", credentials=credentials)
    with pytest.raises(ClientError, match="is not authorized to perform: states:ListExecutions"):
        sfn.list_executions(stateMachineArn=output(deployment, "StageAStateMachineArn"))
    # What it is granted goes through to the service (which answers that there is no such execution).
    machine = output(deployment, "StageAStateMachineArn")
    with pytest.raises(ClientError, match="ExecutionDoesNotExist"):
        sfn.describe_execution(executionArn=machine.replace(":stateMachine:", ":execution:") + ":none")


def test_an_unsigned_or_unknown_caller_is_refused(deployment: Deployment) -> None:
    from lakeline.runtimes.deployed.local_aws.iam import Credentials

    stranger = deployment.client("sqs", credentials=Credentials("AKIAUNKNOWN000000000", "secret"))
    with pytest.raises(ClientError, match=r"InvalidClientTokenId|security token"):
        stranger.list_queues()


def test_gap_resources_other_than_s3_and_sqs_are_not_checked(deployment: Deployment, functions: FunctionHost) -> None:
    """The router may describe the pipeline state table only; AWS would refuse the dependencies table.
    moto authorizes DynamoDB (and Glue, Step Functions, Athena, Lambda) actions against ``*``, so the
    rehearsal checks their actions, not which table (a documented gap)."""
    credentials = functions.environments[_router(functions)].credentials
    dynamodb = deployment.client("dynamodb", credentials=credentials)
    dynamodb.describe_table(TableName=output(deployment, "DependenciesTable"))


def test_s3_and_sqs_resources_are_checked(deployment: Deployment, functions: FunctionHost) -> None:
    """S3 and SQS are the exceptions: moto names the bucket and key, or the queue, so one the role has no
    grant on is refused."""
    credentials = functions.environments[_router(functions)].credentials
    s3 = deployment.client("s3", credentials=credentials)
    (artifacts,) = [
        b["Name"] for b in deployment.client("s3").list_buckets()["Buckets"] if "lineagearchive" in b["Name"].lower()
    ]
    with pytest.raises(ClientError, match="AccessDenied"):
        s3.put_object(Bucket=artifacts, Key="x", Body=b"x")
    sqs = deployment.client("sqs", credentials=credentials)
    with pytest.raises(ClientError, match="not authorized to perform: sqs:SendMessage"):
        sqs.send_message(QueueUrl=output(deployment, "LineageDeadLetterQueueUrl"), MessageBody="x")


def test_a_function_invoked_without_a_payload_is_signed_checked_and_given_the_event_lambda_gives(
    deployment: Deployment, functions: FunctionHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``aws lambda invoke`` without ``--payload`` sends no body (``Content-Length: 0``): moto checked its
    signature over the request's headers instead (``SignatureDoesNotMatch``), and the function was given
    ``None`` where Lambda gives ``{}`` (#42). Signed with a wrong secret, it is still refused. The function's
    own code is left out (it is the router's, which would route nothing): what it is given is echoed."""
    credentials = deployment.credentials
    assert credentials is not None
    environment = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
        "AWS_ENDPOINT_URL": deployment.endpoint,
        "AWS_DEFAULT_REGION": deployment.region,
        "AWS_ACCESS_KEY_ID": credentials.access_key_id,
        "AWS_SECRET_ACCESS_KEY": credentials.secret_access_key,
    }
    aws = str(Path(sys.executable).parent / "aws")
    router = _router(functions)
    monkeypatch.setattr(functions, "invoke", lambda name, event: {"function": name, "event": event})

    def invoke(name: str, **changed: str) -> subprocess.CompletedProcess[str]:
        command = [aws, "lambda", "invoke", str(tmp_path / "out.json"), "--function-name", name]
        return subprocess.run(command, env={**environment, **changed}, capture_output=True, text=True, timeout=120)

    done = invoke(router)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"StatusCode": 200}
    assert json.loads((tmp_path / "out.json").read_text()) == {"function": router, "event": {}}
    assert "ResourceNotFoundException" in invoke("lakeline-none").stderr
    wrong = invoke(router, AWS_SECRET_ACCESS_KEY="wrong" + credentials.secret_access_key[5:])
    assert wrong.returncode != 0 and "SignatureDoesNotMatch" in wrong.stderr
    answer = deployment.client("lambda").invoke(FunctionName=router)  # boto3, without a Payload
    assert json.loads(answer["Payload"].read()) == {"function": router, "event": {}}
