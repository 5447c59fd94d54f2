"""The one retry pacing for AWS calls that botocore's own retries do not cover: calls that partly fail
(UnprocessedItems, refused SQS batch entries) and error codes a caller knows to be passing.

Exponential backoff with full jitter, as AWS recommends. ``sleep`` and ``random`` are injectable so
tests and benchmarks never wait.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from botocore.exceptions import ClientError

from lakeline.errors import LakelineError

_T = TypeVar("_T")

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

    def before_retry(self, retry: int, what: str) -> None:
        """Wait before retry number ``retry`` of ``what``, or raise ``RetriesExhausted`` if the attempts
        are spent."""
        if retry >= self.attempts:
            raise RetriesExhausted(f"{what}: still not done after {retry} attempts")
        self.wait(retry)


class RetriesExhausted(LakelineError):
    """A call kept partly failing (or kept failing with a passing error) through every attempt."""


def call_retrying(
    call: Callable[[], _T],
    backoff: Backoff,
    *,
    retryable: Callable[[ClientError], bool] = is_retryable,
    on_retry: Callable[[ClientError, int], None] = lambda _error, _retry: None,
) -> _T:
    """``call()``, again after a ``retryable`` error until ``backoff``'s attempts are spent (then the
    last error is raised as it is)."""
    retry = 0
    while True:
        try:
            return call()
        except ClientError as error:
            retry += 1
            if not retryable(error) or retry >= backoff.attempts:
                raise
            on_retry(error, retry)
            backoff.wait(retry)


NO_WAIT = Backoff(sleep=lambda _seconds: None)
