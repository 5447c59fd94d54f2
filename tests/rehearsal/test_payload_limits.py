"""Step Functions' payload quota in the rehearsal (#39): ``StartExecution`` refuses an input over 256 KiB as AWS
does, so a plan too large for AWS cannot pass here (the states' own inputs and outputs:
``tests/unit/test_rehearsal_interpreter.py``)."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.executions import PAYLOAD_LIMIT, ExecutionHost
from tests.rehearsal.support import output


def test_start_execution_refuses_an_input_over_256_kib_and_starts_nothing(
    deployment: Deployment, executions: ExecutionHost
) -> None:
    sfn = deployment.client("stepfunctions")
    machine = output(deployment, "StageAStateMachineArn")
    before = sfn.list_executions(stateMachineArn=machine)["executions"]
    # Multi-byte characters: the quota is on the UTF-8 bytes, not the characters.
    oversized = json.dumps({"plan": {"note": "é" * (PAYLOAD_LIMIT // 2)}, "arrival": None}, ensure_ascii=False)
    assert len(oversized) < PAYLOAD_LIMIT < len(oversized.encode())
    with pytest.raises(ClientError) as refused:
        sfn.start_execution(stateMachineArn=machine, name="too-large-input", input=oversized)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "less than or equal to 262144" in refused.value.response["Error"]["Message"]
    assert sfn.list_executions(stateMachineArn=machine)["executions"] == before
