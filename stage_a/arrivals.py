"""Arrivals: the S3 events that start stage A, in either shape S3 delivers them.

- EventBridge "Object Created" events (``detail.bucket.name``, ``detail.object.key``), which is how the
  CDK app wires the raw bucket; the key arrives as written.
- S3 event notifications (``Records[].s3``), for buckets wired the classic way; their keys are
  URL-encoded and are decoded exactly once.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, Self

from pydantic import BaseModel, ConfigDict

from lakeline.errors import InvalidInputError
from stage_a.keys import RawObject, decode_notification_key, parse_raw_key

EXECUTION_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class Arrival(BaseModel):
    model_config = ConfigDict(frozen=True)

    bucket: str
    key: str
    sequencer: str = ""
    event_time: datetime
    size: int | None = None

    @cached_property
    def raw(self) -> RawObject:
        """The key parsed (``InvalidKey`` if it is not a raw table's): once per arrival, whoever asks."""
        return parse_raw_key(self.key)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy whose key is parsed afresh: the parsed key is cached in the instance, which a copy shares."""
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop("raw", None)
        return copied

    @property
    def identity(self) -> str:
        """The same object version gives the same identity, however often its event is delivered."""
        return f"{self.bucket}/{self.key}@{self.sequencer}"

    def execution_name(self, table_hint: str = "") -> str:
        """A Step Functions execution name (<= 80 chars of [A-Za-z0-9_-]) fixed by the arrival, so a
        redelivered event cannot start a second execution."""
        digest = hashlib.sha256(self.identity.encode()).hexdigest()[:40]
        prefix = EXECUTION_NAME_UNSAFE.sub("-", table_hint)[:38]
        return f"{prefix}-{digest}" if prefix else digest


def _event_time(value: Any) -> datetime:
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    return datetime.now(UTC)


def parse_arrivals(event: Any) -> list[Arrival]:
    """Arrivals in one event body; an event of another kind is an ``InvalidInputError``."""
    if not isinstance(event, dict):
        raise InvalidInputError(f"message is a JSON {type(event).__name__}, not an event object")
    if event.get("source") == "aws.s3" and "detail" in event:
        if event.get("detail-type") != "Object Created":
            raise InvalidInputError(f"S3 event of type {event.get('detail-type')!r} does not start stage A")
        detail = event["detail"]
        try:
            return [
                Arrival(
                    bucket=detail["bucket"]["name"],
                    key=detail["object"]["key"],
                    sequencer=str(detail["object"].get("sequencer", "")),
                    size=detail["object"].get("size"),
                    event_time=_event_time(event.get("time")),
                )
            ]
        except (KeyError, TypeError) as error:
            raise InvalidInputError(f"EventBridge S3 event is missing {error}") from error
    if isinstance(event.get("Records"), list):
        arrivals = []
        for record in event["Records"]:
            if not isinstance(record, dict):
                raise InvalidInputError(f"S3 notification record is a {type(record).__name__}, not an object")
            if not str(record.get("eventName", "")).startswith("ObjectCreated:"):
                continue
            try:
                s3 = record["s3"]
                arrivals.append(
                    Arrival(
                        bucket=s3["bucket"]["name"],
                        key=decode_notification_key(s3["object"]["key"]),
                        sequencer=str(s3["object"].get("sequencer", "")),
                        size=s3["object"].get("size"),
                        event_time=_event_time(record.get("eventTime")),
                    )
                )
            except (KeyError, TypeError) as error:
                raise InvalidInputError(f"S3 notification record is missing {error}") from error
        return arrivals
    if event.get("Event") == "s3:TestEvent":
        return []
    raise InvalidInputError("message is neither an EventBridge S3 event nor an S3 event notification")


def arrival_event(arrival: Arrival) -> dict[str, Any]:
    """The EventBridge "Object Created" event of an arrival (what queue A receives from S3)."""
    return {
        "version": "0",
        "source": "aws.s3",
        "detail-type": "Object Created",
        "time": arrival.event_time.isoformat(),
        "detail": {
            "bucket": {"name": arrival.bucket},
            "object": {"key": arrival.key, "sequencer": arrival.sequencer, "size": arrival.size},
        },
    }


def pending_entry(arrival: Arrival) -> str:
    """How an arrival waits in its partition's state (``pending``, a string set): its fields by position, as
    a compact JSON array, so a burst of thousands fits one DynamoDB item (400 KB) and a run's batch its state
    machine input. The same arrival always gives the same entry (a redelivery adds nothing)."""
    fields = [arrival.key, arrival.sequencer, arrival.event_time.isoformat(), arrival.size, arrival.bucket]
    return json.dumps(fields, separators=(",", ":"))


def pending_arrival(entry: str) -> Arrival:
    """The arrival of a ``pending`` entry (``pending_entry``; an entry written as the arrival's JSON object
    before is read as well)."""
    try:
        if entry.startswith("{"):
            return Arrival.model_validate_json(entry)
        key, sequencer, event_time, size, bucket = json.loads(entry)
        return Arrival(bucket=bucket, key=key, sequencer=sequencer, event_time=event_time, size=size)
    except (ValueError, TypeError) as error:  # pydantic's ValidationError is a ValueError
        raise InvalidInputError(f"pending arrival {entry[:200]!r} is malformed: {error}") from None
