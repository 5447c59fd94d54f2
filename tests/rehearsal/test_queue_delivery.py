"""Queue → function delivery as Lambda's SQS pollers do it (``lakeline.runtimes.deployed.local_aws.pollers``, #39): a
send returns at once, whatever the function it wakes does; what waits is delivered in batches of up to the mapping's
``BatchSize`` once the function is free. moto delivered inside ``SendMessage``, one message per invocation: a slow
router held up the S3 put or the function that sent to its queue (the nightly schedule ran every trace inside its
own five minutes)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.executions import ExecutionHost
from lakeline.runtimes.deployed.local_aws.functions import FunctionHost
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


def test_a_follow_up_is_delivered_between_the_batches_of_a_backlog_in_queue_a(
    deployment: Deployment, functions: FunctionHost, executions: ExecutionHost
) -> None:
    """The router reads the follow-up queue through its own mapping (#39): a follow-up run, which holds its
    partition's lease and the run slot its run handed it, is taken as soon as the router is free, not after the
    backlog a burst left in queue A (12 minutes in the scale benchmark when follow-ups were queued there)."""
    executions.wait()
    sqs = deployment.client("sqs")
    queue, follow_ups = output(deployment, "StageAQueueUrl"), output(deployment, "StageAFollowUpQueueUrl")
    backlog = [json.dumps({"not": "an arrival", "backlog": index}) for index in range(31)]
    follow_up = json.dumps({"not": "an arrival", "follow_up": True})
    since = len(functions.invocations)
    with functions.held(ROUTER) as reached:
        sqs.send_message(QueueUrl=queue, MessageBody=backlog[0])
        assert reached.wait(30), "the router was never given the message"
        for body in backlog[1:]:
            sqs.send_message(QueueUrl=queue, MessageBody=body)
        sqs.send_message(QueueUrl=follow_ups, MessageBody=follow_up)
    executions.wait()
    batches = [[record["body"] for record in event["Records"]] for event in router_events(functions, since)]
    assert sum(len(batch) for batch in batches) == len(backlog) + 1
    assert batches[1] == [follow_up], f"the follow-up waited behind queue A's backlog: {batches}"
    assert len(batches) >= 5, "queue A's backlog was delivered in batches of at most 10"


def test_queue_a_s_batching_window_gathers_a_burst_into_one_batch_and_passes_if_the_burst_lasts(
    deployment: Deployment, functions: FunctionHost, executions: ExecutionHost
) -> None:
    """Queue A's mapping has a 5-second batching window: while a burst is sent (``Pollers.gathering``, around
    ``lakeline run``'s uploads), what comes goes in one batch once the burst ends, as Lambda's pollers gather it
    for the window, so a partition's files uploaded together make one run. A burst longer than the window is
    delivered when the window has passed; outside a burst, a message goes at once."""
    executions.wait()
    sqs, queue = deployment.client("sqs"), output(deployment, "StageAQueueUrl")
    burst = [json.dumps({"not": "an arrival", "burst": index}) for index in range(3)]
    since = len(functions.invocations)
    with functions.held(ROUTER) as reached:
        with executions.pollers.gathering():
            for body in burst:
                sqs.send_message(QueueUrl=queue, MessageBody=body)
                time.sleep(0.5)  # each would have gone alone without the window
            assert not reached.is_set(), "a message of the burst went before the burst ended"
        assert reached.wait(30), "the burst was never delivered"
    executions.wait()
    assert [[record["body"] for record in event["Records"]] for event in router_events(functions, since)] == [burst]

    lasting = json.dumps({"not": "an arrival", "lasting": True})
    with executions.pollers.gathering(), functions.held(ROUTER) as reached:
        sent = time.monotonic()
        sqs.send_message(QueueUrl=queue, MessageBody=lasting)
        assert reached.wait(30), "the burst's message was never delivered"
        waited = time.monotonic() - sent
    assert 4.5 <= waited < 30, f"delivered {waited:.1f} s after it was sent, inside a burst, with a 5-second window"
    executions.wait()

    alone = json.dumps({"not": "an arrival", "alone": True})
    with functions.held(ROUTER) as reached:
        sent = time.monotonic()
        sqs.send_message(QueueUrl=queue, MessageBody=alone)
        assert reached.wait(30), "the message was never delivered"
        waited = time.monotonic() - sent
    assert waited < 4.5, f"a message outside a burst waited {waited:.1f} s, as for the batching window"
    executions.wait()
    assert all("not an S3 arrival" in parked(deployment)[body] for body in [*burst, lasting, alone])
