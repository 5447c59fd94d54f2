"""Lambda's SQS pollers, which moto lacks.

In AWS, an event source mapping polls its queue all the time: a message that failed is received again
once its visibility timeout ends, until the queue's redrive policy moves it to the dead-letter queue
after ``maxReceiveCount`` receives. moto delivers only inside a ``SendMessage`` (one batch per send), so
a message that failed waits for the next send to its queue, and the delivery that send was for may be
another message's. ``deliver_waiting`` does what the pollers do, for every queue with an enabled
mapping, until none has a message to deliver: each batch goes to the function; a batch the function
failed is visible again at once (the rehearsal does not wait out visibility timeouts), so a message
that keeps failing reaches its DLQ after ``maxReceiveCount`` receives, as in AWS, only sooner.

moto's ``ReceiveMessage`` checks that a message is visible and then marks it received with nothing in
between to stop a second receiver: the pollers and moto's delivery inside a send could both take one
message. ``install`` makes receiving one at a time (``uninstall`` undoes it), as SQS hides a received
message from every other receiver.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

_receiving = threading.Lock()


def deliver_waiting(account: str, region: str) -> int:
    """Deliver every visible message of the queues with event source mappings; how many were delivered."""
    from moto.awslambda.utils import get_backend
    from moto.sqs.models import sqs_backends

    queues: Any = sqs_backends[account][region]  # moto's models, untyped where this reads them
    functions = get_backend(account, region)
    delivered = 0
    for queue in list(queues.queues.values()):
        for arn, mapping in list(queue.lambda_event_source_mappings.items()):
            if not mapping.enabled:
                continue
            while messages := queues.receive_message(queue.name, mapping.batch_size, 0, queue.visibility_timeout):
                delivered += len(messages)
                if functions.send_sqs_batch(arn, messages, queue.queue_arn):
                    for message in messages:
                        queues.delete_message(queue.name, message.receipt_handle)
                else:
                    for message in messages:
                        queues.change_message_visibility(queue.name, message.receipt_handle, visibility_timeout=0)
    return delivered


def install() -> Callable[[], None]:
    """Receive SQS messages one receiver at a time; returns what undoes it."""
    from moto.sqs.models import SQSBackend

    original = SQSBackend.receive_message

    def receive_message(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _receiving:
            return original(self, *args, **kwargs)

    setattr(SQSBackend, "receive_message", receive_message)  # noqa: B010
    return lambda: setattr(SQSBackend, "receive_message", original)
