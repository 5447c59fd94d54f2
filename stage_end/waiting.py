"""Which stage a partition's waiting arrivals are for (``stage_of``): the sweep of stranded partitions queues their
follow-up on that stage's queue. Kept apart from the run ends: the sweep function has no OpenLineage layer."""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from pydantic import ValidationError

from lakeline.commits import TakenBatch
from lakeline.errors import InvalidInputError
from stage_a.arrivals import pending_arrival
from stage_b.messages import StageBMessage

Stage = Literal["A", "B"]


def stage_of(entry: str) -> Stage:
    """The stage a ``pending`` entry waits for: a stage A arrival or a stage B message."""
    try:
        pending_arrival(entry)
        return "A"
    except InvalidInputError:
        pass
    try:
        StageBMessage.model_validate_json(entry)
        return "B"
    except ValidationError:
        raise InvalidInputError(
            f"pending entry {entry[:200]!r} is neither a stage A arrival nor a stage B message"
        ) from None


def waiting_stage(pending: Collection[str], taken: TakenBatch | None) -> Stage:
    """The stage whose run takes what waits on a partition: a batch taken out of ``pending`` is stage A's (a stage B
    run takes none, #39), else the stage of what ``pending`` holds."""
    return "A" if taken is not None else stage_of(min(pending))
