"""A record a router sends back to wait in its queue (``DelaySeconds``: a full partition, no free slot; #39) keeps
the deployment busy until it is delivered: before, the rehearsal called the deployment at rest once no execution
ran and no message was visible, and a command ended with such a record still waiting, its file never loaded."""

from __future__ import annotations

import json
import time

from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.executions import ExecutionHost
from tests.rehearsal.support import output, parked

DELAY_SECONDS = 3


def test_the_deployment_is_not_at_rest_while_a_record_waits_out_its_delay(
    deployment: Deployment, executions: ExecutionHost
) -> None:
    executions.wait()
    body = json.dumps({"not": "an arrival", "sent back": "test_delayed_records"})
    sent = time.monotonic()
    deployment.client("sqs").send_message(
        QueueUrl=output(deployment, "StageAQueueUrl"), MessageBody=body, DelaySeconds=DELAY_SECONDS
    )
    executions.wait()
    assert time.monotonic() - sent >= DELAY_SECONDS
    # The router took it once it could be delivered (it is no arrival: parked with its reason).
    assert "not an S3 arrival" in parked(deployment)[body]
