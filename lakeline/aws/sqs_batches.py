"""Powertools partial batch responses for handlers that write a whole batch at once.

Powertools' ``BatchProcessor`` calls the record handler once per message. The lineage loader needs
the opposite for its writes (25 items per call across messages) while keeping per-message failure:
the record handler only parses and validates (Powertools reports the messages that fail), then
``flush`` writes every valid message's result together and names the messages whose writes failed.
Those are moved from success to failure through Powertools' own ``failure_handler``, so the partial
batch response reports exactly them and SQS redelivers nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from lakeline.errors import LakelineError


class BatchWriteFailed(LakelineError):
    """A message was valid but its write did not succeed; SQS will deliver it again."""


Flush = Callable[[Sequence[tuple[str, Any]]], Mapping[str, str]]


class BufferedSqsBatchProcessor(BatchProcessor):
    """Validate per message, write per batch, report failures per message."""

    def __init__(self, flush: Flush, **options: Any) -> None:
        super().__init__(event_type=EventType.SQS, **options)
        self._flush = flush

    def process(self) -> list[tuple[Any, ...]]:
        results: list[tuple[Any, ...]] = list(super().process())
        valid = [(outcome[2]["messageId"], outcome[1]) for outcome in results if outcome[0] == "success"]
        if not valid:
            return results
        failures = self._flush(valid)
        if not failures:
            return results
        for position, outcome in enumerate(results):
            raw = outcome[2]
            if outcome[0] != "success" or raw["messageId"] not in failures:
                continue
            self.success_messages.remove(raw)
            error = BatchWriteFailed(failures[raw["messageId"]])
            results[position] = self.failure_handler(record=SQSRecord(raw), exception=(type(error), error, None))
        return results
