"""Retry pacing for AWS calls that partly fail (UnprocessedItems, failed SQS entries, throttling).

Exponential backoff with full jitter, as AWS recommends. ``sleep`` and ``random`` are injectable so
tests and benchmarks never wait.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from botocore.exceptions import ClientError

RETRYABLE_ERROR_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "InternalServerError",
        "ServiceUnavailable",
        "RequestThrottled",
        "SlowDown",
    }
)


def is_retryable(error: ClientError) -> bool:
    """Throttling and server-side errors: the same request may succeed later."""
    return error.response.get("Error", {}).get("Code", "") in RETRYABLE_ERROR_CODES


@dataclass(frozen=True)
class Backoff:
    """``attempts`` tries in all; before retry ``k`` (k >= 1) wait ``jitter() * min(cap, base * 2**(k-1))``."""

    attempts: int = 8
    base_seconds: float = 0.05
    cap_seconds: float = 5.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    jitter: Callable[[], float] = field(default=random.random, repr=False)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("Backoff needs at least one attempt")

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first retry)."""
        return self.jitter() * min(self.cap_seconds, self.base_seconds * 2.0 ** (retry - 1))

    def wait(self, retry: int) -> None:
        self.sleep(self.delay(retry))


NO_WAIT = Backoff(sleep=lambda _seconds: None)
