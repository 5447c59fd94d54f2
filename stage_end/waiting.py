"""Which stage a partition's waiting arrivals are for (``stage_of``): the sweep of stranded partitions queues their
follow-up on that stage's queue; and what a queued or parked message is about (``queued_subject``). Kept apart from
the run ends: the sweep function has no OpenLineage layer."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Literal

from pydantic import ValidationError

from lakeline.commits import TakenBatch
from lakeline.errors import InvalidInputError, LakelineError
from stage_a.arrivals import parse_arrivals, pending_arrival
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


def queued_subject(body: str) -> str:
    """What a queued message is about, to name it in a failure line ``<subject>: <error>`` or a DLQ listing: the raw
    keys of an S3 event, the target partition (``db.table/k=v``) of a stage B message, else the start of the body
    (a colon in it followed by no space, so that a failure line still splits at its first ``: ``)."""
    try:
        keys = [arrival.key for arrival in parse_arrivals(json.loads(body))]
    except (ValueError, LakelineError):
        keys = []
    if keys:
        return ", ".join(keys)
    try:
        return StageBMessage.model_validate_json(body).node
    except ValidationError:
        return body[:120].replace(": ", ":")
