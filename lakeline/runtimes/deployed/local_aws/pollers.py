"""Lambda's SQS pollers, which moto lacks.

In AWS, an event source mapping's pollers read its queue apart from whoever sends to it: ``SendMessage``
returns at once, and batches of up to the mapping's ``BatchSize`` go to the function while the sender goes
on. A batch the function failed, or the records it reported failed (``ReportBatchItemFailures``), are
received again once visible, until the queue's redrive policy moves them to the dead-letter queue after
``maxReceiveCount`` receives. moto instead delivers inside ``SendMessage``, one message per invocation,
with the receive count always 1 and reported failures deleted: a router's slow batch held up the S3 put
or the function that sent to its queue (the nightly schedule ran every trace inside its own five minutes).

``Pollers`` does what Lambda's pollers do, in threads of this process: ``add_message`` only keeps the
message and wakes them; a dispatcher takes a batch from each queue with an enabled mapping whose function
is not already busy with one (the rehearsal runs one environment per function, ``functions.WarmFunction``),
and a worker gives it to the function. Known difference, on purpose: a failed record is visible again at
once (the rehearsal does not wait out visibility timeouts), so one that keeps failing reaches its DLQ after
``maxReceiveCount`` receives, as in AWS, only sooner.

moto's ``ReceiveMessage`` checks that a message is visible and then marks it received with nothing in
between to stop a second receiver: the pollers and a test receiving from the same queue could both take
one message. Receiving is made one receiver at a time while installed, as SQS hides a received message
from every other receiver.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from lakeline.aws.sqs import lambda_message_attribute
from lakeline.errors import LakelineError

WORKERS = 8
"""Batches delivered at once, across mappings (each mapping's function takes one batch at a time here)."""
IDLE_WAKE_SECONDS = 0.5
"""The longest the dispatcher sleeps with nothing to deliver: a message becomes visible again, or a
receiver other than the pollers let it go, without a send to wake it."""

_receiving = threading.Lock()
_adding = threading.Lock()
"""Held while ``add_message`` hides a queue's mappings from moto's delivery, and by whoever reads them: two
sends at once must not restore each other's hidden (empty) mappings, nor a reader take the queue as unmapped."""


class Pollers:
    """The event source mappings of SQS queues on the rehearsal's account and region, delivered as Lambda does."""

    def __init__(self, account: str, region: str, *, workers: int = WORKERS) -> None:
        self.account = account
        self.region = region
        self.workers = workers
        self.deliveries = 0
        """Batches taken so far: a waiter that sees it unchanged across its checks saw no delivery begin."""
        self._changed = threading.Condition()
        self._busy: set[str] = set()  # the functions (ARNs) a batch is being delivered to
        self._served: dict[str, int] = {}  # each mapping's (uuid) last batch, by ``deliveries``
        self._stopping = False
        self._gathering = 0  # senders of a burst under way (``gathering``)
        self._gathered: dict[str, float] = {}  # each gathering mapping's (uuid) first message seen, ``time.monotonic``
        self._pool: ThreadPoolExecutor | None = None
        self._dispatcher: threading.Thread | None = None
        self._uninstall: Callable[[], None] = lambda: None

    def install(self) -> None:
        """Keep sent messages without delivering them, receive one receiver at a time, and start polling."""
        from moto.sqs.models import Queue, SQSBackend

        original_add, original_receive = Queue.add_message, SQSBackend.receive_message
        pollers = self

        def add_message(queue: Any, message: Any) -> None:
            with _adding:
                mappings = queue.lambda_event_source_mappings
                queue.lambda_event_source_mappings = {}  # kept, and the pollers woken below: moto would deliver here
                try:
                    original_add(queue, message)
                finally:
                    queue.lambda_event_source_mappings = mappings
            pollers.wake()

        def receive_message(backend: Any, *args: Any, **kwargs: Any) -> Any:
            with _receiving:
                return original_receive(backend, *args, **kwargs)

        setattr(Queue, "add_message", add_message)  # noqa: B010
        setattr(SQSBackend, "receive_message", receive_message)  # noqa: B010
        self._stopping = False
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="sqs poller")
        self._dispatcher = threading.Thread(target=self._dispatch, name="sqs pollers", daemon=True)
        self._dispatcher.start()

        def uninstall() -> None:
            setattr(Queue, "add_message", original_add)  # noqa: B010
            setattr(SQSBackend, "receive_message", original_receive)  # noqa: B010

        self._uninstall = uninstall

    def uninstall(self) -> None:
        """Stop polling (batches under way end first) and let moto deliver as it does again."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        if self._dispatcher is not None:
            self._dispatcher.join()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self._uninstall()

    def wake(self) -> None:
        with self._changed:
            self._changed.notify_all()

    @contextmanager
    def gathering(self) -> Iterator[None]:
        """Around a burst of sends: a mapping with a batching window gathers its queue's messages into one batch
        (up to its ``BatchSize``) until the burst ends or the window has passed since its first message came,
        as Lambda's pollers do for the window's length, instead of giving the function each as it comes."""
        with self._changed:
            self._gathering += 1
        try:
            yield
        finally:
            with self._changed:
                self._gathering -= 1
                self._changed.notify_all()

    def _gathers(self, queue: Any, mapping: Any) -> float | None:
        """Seconds left of the window ``mapping`` is gathering its queue's messages in; ``None``: deliver now."""
        window = mapping.max_batch_window or 0
        with self._changed:
            if not self._gathering or not window:
                self._gathered.pop(mapping.uuid, None)
                return None
        waiting = len(queue.messages)
        if not waiting:
            self._gathered.pop(mapping.uuid, None)  # taken by another receiver: the next message opens a window
            return None
        first = self._gathered.setdefault(mapping.uuid, time.monotonic())
        left = first + window - time.monotonic()
        # A window is closed by the batch it gathered being taken (``_dispatch``), not here: its function may be busy.
        return None if waiting >= (mapping.batch_size or 10) or left <= 0 else left

    def settle(self, timeout: float, deadline: float | None = None) -> None:
        """Wait until ``at_rest`` (a delayed message may wait on), at most ``timeout`` seconds (or until the
        ``time.monotonic`` ``deadline`` of a longer wait that began earlier), then fail naming what it waited for."""
        deadline = time.monotonic() + timeout if deadline is None else deadline
        with self._changed:
            while not self.at_rest():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise LakelineError(f"messages still being delivered to their functions after {timeout:.0f} s")
                self._changed.wait(min(remaining, IDLE_WAKE_SECONDS))  # woken by a send or a batch's end

    def at_rest(self) -> bool:
        """No batch is being delivered and no queue with an enabled mapping has a visible message."""
        with self._changed:
            if self._busy:
                return False
        return not any(queue.messages for queue, _ in self._mappings())

    def next_delayed(self) -> float | None:
        """Seconds until the first message sent with a delay (``DelaySeconds``: a router sends a record back to
        wait, ``lambdas/router.py send_back``) to a queue with an enabled mapping can be delivered; ``None``:
        none waits. The deployment is not at rest while one does."""
        from moto.core.utils import unix_time_millis

        now = unix_time_millis()
        queues = {id(queue): queue for queue, _ in self._mappings()}.values()
        waits = [
            (message.delayed_until - now) / 1000
            for queue in queues
            for message in list(queue._messages)
            if message.delayed
        ]
        return max(0.0, min(waits)) if waits else None

    def _mappings(self) -> list[tuple[Any, Any]]:
        from moto.sqs.models import sqs_backends

        queues: Any = sqs_backends[self.account][self.region]  # moto's models, untyped where this reads them
        with _adding:
            return [
                (queue, mapping)
                for queue in list(queues.queues.values())
                for mapping in list(queue.lambda_event_source_mappings.values())
                if mapping.enabled
            ]

    def _dispatch(self) -> None:
        from moto.sqs.models import sqs_backends

        backend: Any = sqs_backends[self.account][self.region]
        while True:
            with self._changed:
                if self._stopping:
                    return
            took = False
            gathering: list[float] = []
            # The mapping served least recently first: a function with two mappings (a router reads its stage's
            # queue and its follow-up queue) takes turns between them, as Lambda's separate pollers of each do,
            # instead of always taking the first queue while it has a backlog.
            mappings = sorted(self._mappings(), key=lambda pair: self._served.get(pair[1].uuid, -1))
            for queue, mapping in mappings:
                left = self._gathers(queue, mapping)
                if left is not None:
                    gathering.append(left)
                    continue
                with self._changed:
                    if mapping.function_arn in self._busy or len(self._busy) >= self.workers:
                        continue
                    self._busy.add(mapping.function_arn)  # before receiving: a waiter never sees the batch nowhere
                messages = backend.receive_message(
                    queue.name, mapping.batch_size or 10, 0, queue.visibility_timeout, ["All"]
                )
                if not messages:
                    self._done(mapping.function_arn)
                    continue
                took = True
                self._gathered.pop(mapping.uuid, None)
                with self._changed:
                    self.deliveries += 1
                    self._served[mapping.uuid] = self.deliveries
                assert self._pool is not None
                self._pool.submit(self._deliver, backend, queue, mapping, messages)
            if not took:
                waits = [wait + 0.01 for wait in [self.next_delayed(), *gathering] if wait is not None]
                with self._changed:
                    if not self._stopping:
                        self._changed.wait(min([IDLE_WAKE_SECONDS, *waits]))

    def _deliver(self, backend: Any, queue: Any, mapping: Any, messages: list[Any]) -> None:
        try:
            failed = self._invoke(queue, mapping, messages)
            for message in messages:
                if message.id in failed:
                    backend.change_message_visibility(queue.name, message.receipt_handle, visibility_timeout=0)
                else:
                    backend.delete_message(queue.name, message.receipt_handle)
        finally:
            self._done(mapping.function_arn)

    def _done(self, function_arn: str) -> None:
        with self._changed:
            self._busy.discard(function_arn)
            self._changed.notify_all()

    def _invoke(self, queue: Any, mapping: Any, messages: list[Any]) -> set[str]:
        """Give the batch to the mapping's function, as Lambda's ``Invoke`` would; the ids of the messages that
        failed (all of them when the function failed; those it reported with ``ReportBatchItemFailures``)."""
        from moto.awslambda.utils import get_backend

        response_headers: dict[str, Any] = {}
        try:
            result = get_backend(self.account, self.region).invoke(
                function_name=mapping.function_arn,
                qualifier=None,
                body=json.dumps(sqs_event(queue.queue_arn, self.region, messages)),
                headers={},
                response_headers=response_headers,
            )
        except Exception:  # the function could not be run at all: its batch is received again, as in AWS
            return {message.id for message in messages}
        if "x-amz-function-error" in response_headers:
            return {message.id for message in messages}
        if "ReportBatchItemFailures" not in (mapping.function_response_types or []):
            return set()
        reply = json.loads(result) if result else None
        failures = reply.get("batchItemFailures") if isinstance(reply, dict) else None
        if not failures:
            return set()
        ids = {message.id for message in messages}
        reported = {str(failure.get("itemIdentifier")) for failure in failures if isinstance(failure, dict)}
        # Lambda takes a reply naming no id of the batch (or an empty id) as the whole batch failed.
        return ids if not reported <= ids else reported


def sqs_event(queue_arn: str, region: str, messages: list[Any]) -> dict[str, Any]:
    """The event Lambda's SQS poller gives the function for ``messages`` (moto's, just received)."""
    return {
        "Records": [
            {
                "messageId": message.id,
                "receiptHandle": message.receipt_handle,
                "body": message.body,
                "attributes": {
                    "ApproximateReceiveCount": str(message.approximate_receive_count),
                    "SentTimestamp": str(message.sent_timestamp),
                    "SenderId": message.sender_id,
                    "ApproximateFirstReceiveTimestamp": str(message.approximate_first_receive_timestamp),
                    **(
                        {"MessageGroupId": message.group_id, "MessageDeduplicationId": message.deduplication_id}
                        if queue_arn.endswith(".fifo")
                        else {}
                    ),
                },
                "messageAttributes": {
                    name: lambda_message_attribute(value) for name, value in (message.message_attributes or {}).items()
                },
                "md5OfBody": message.body_md5,
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
            for message in messages
        ]
    }
