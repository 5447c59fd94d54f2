"""Queue → function delivery as Lambda's SQS pollers do it (``lakeline.local.rehearsal.pollers``, #39): a send
returns at once, whatever the function it wakes does; what waits is delivered in batches of up to the mapping's
``BatchSize`` once the function is free. moto delivered inside ``SendMessage``, one message per invocation: a slow
router held up the S3 put or the function that sent to its queue (the nightly schedule ran every trace inside its
own five minutes)."""

from __future__ import annotations

import json
import threading
from typing import Any

from lakeline.local.rehearsal.deploy import Deployment
from lakeline.local.rehearsal.executions import ExecutionHost
from lakeline.local.rehearsal.functions import FunctionHost
from tests.rehearsal.support import output, parked

ROUTER = "-StageARouter"


def router_events(functions: FunctionHost, since: int) -> list[dict[str, Any]]:
    return [event for name, event, _ in functions.invocations[since:] if ROUTER in name]


def test_a_send_returns_while_the_function_it_wakes_runs_and_what_waits_goes_in_one_batch(
    deployment: Deployment, functions: FunctionHost, executions: ExecutionHost
) -> None:
    executions.wait()
    sqs, queue = deployment.client("sqs"), output(deployment, "StageAQueueUrl")
    bodies = [json.dumps({"not": "an arrival", "test_queue_delivery": index}) for index in range(5)]
    since = len(functions.invocations)
    with functions.held(ROUTER) as reached:
        sender = threading.Thread(target=lambda: sqs.send_message(QueueUrl=queue, MessageBody=bodies[0]))
        sender.start()
        sender.join(30)
        assert not sender.is_alive(), "SendMessage waited for the function its message went to"
        assert reached.wait(30), "the router was never given the message"
        for body in bodies[1:]:  # sent while the router's environment is busy with the first
            sqs.send_message(QueueUrl=queue, MessageBody=body)
        assert not executions.pollers.at_rest()
        assert not set(bodies) & set(parked(deployment))
    executions.wait()
    reasons = parked(deployment)
    assert all("not an S3 arrival" in reasons[body] for body in bodies)
    batches = [[record["body"] for record in event["Records"]] for event in router_events(functions, since)]
    assert batches == [bodies[:1], bodies[1:]]
    first = router_events(functions, since)[0]["Records"][0]
    assert first["attributes"]["ApproximateReceiveCount"] == "1"
    assert first["eventSourceARN"].endswith(queue.rsplit("/", 1)[1])
