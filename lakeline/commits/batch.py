"""A run's batch of what waits on its partition (#39).

A run's state machine input carries what it takes, and Step Functions refuses an input over 256 KiB. So a
run takes a bounded batch of what waits, oldest first; the rest stays in ``pending`` and the run's end hands
the lease to a follow-up run that takes the next batch, until nothing waits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

Waiting = TypeVar("Waiting")


def bounded_batch(
    waiting: Sequence[Waiting], cost: Callable[[Waiting], int], *, max_items: int, max_bytes: int
) -> list[Waiting]:
    """The first of ``waiting`` (oldest first, as given): at most ``max_items`` of them, costing at most
    ``max_bytes`` together (``cost``: what one adds to the run's input). The first is always taken, so a run
    always makes progress."""
    batch: list[Waiting] = []
    spent = 0
    for item in waiting[:max_items]:
        spent += cost(item)
        if batch and spent > max_bytes:
            break
        batch.append(item)
    return batch
