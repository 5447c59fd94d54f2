"""OpenLineage events kept next to the archived lineage records: one object per event.

    <events location>/dt=YYYY-MM-DD/<runId>.<EVENTTYPE>.json

``dt`` is the event's own date (UTC), so the Glue table over the folder (``lineage.openlineage.table``) is
partitioned like the lineage archive and Athena reads one day at a time. The key is fixed by the
run id and the event type: a retried step writes its events again onto the same objects instead of
adding twins. An event sent in parts (``lineage.openlineage.bound``) keeps its name for its part 0 and
``<runId>.<EVENTTYPE>.part<N>.json`` for the RUNNING parts after it. Each object is the event (or part) as one
line of JSON, exactly what a transport would send.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from lakeline.errors import InvalidInputError
from lakeline.lineage.records.archive import PARTITION_COLUMN, ArchiveStore

EVENTS_FOLDER = "openlineage/"
"""Where the events go in the archive bucket, beside the lineage records' folder."""
EVENT_TYPES = frozenset({"START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"})


def event_object_key(event: Mapping[str, Any], name: str | None = None) -> str:
    """``dt=<event date>/<runId>.<eventType>.json`` (or ``<name>.json``: a part's ``archive_name``); a clear
    error if the event lacks what names it."""
    try:
        run_id = str(uuid.UUID(str(event["run"]["runId"])))
        event_type = str(event["eventType"])
        moment = datetime.fromisoformat(str(event["eventTime"]))
    except (KeyError, TypeError, ValueError) as error:
        raise InvalidInputError(f"not an OpenLineage RunEvent with runId, eventType and eventTime: {error}") from None
    if event_type not in EVENT_TYPES:
        raise InvalidInputError(f"eventType {event_type!r} is not one of {sorted(EVENT_TYPES)}")
    if moment.tzinfo is None:
        raise InvalidInputError(f"eventTime {event['eventTime']!r} has no time zone")
    day = moment.astimezone(UTC).date()
    return f"{PARTITION_COLUMN}={day.isoformat()}/{name or f'{run_id}.{event_type}'}.json"


class EventArchive:
    """The events folder of the archive, through an ``ArchiveStore`` rooted at it."""

    def __init__(self, store: ArchiveStore) -> None:
        self.store = store

    def put(self, events: Iterable[Mapping[str, Any]], names: Iterable[str | None] = ()) -> list[str]:
        """Store each event (under its part's name, ``names``, where given); all are checked before the first
        is written. Returns their locations."""
        given = list(names)
        named = [
            (event_object_key(event, given[index] if index < len(given) else None), event)
            for index, event in enumerate(events)
        ]
        return [
            self.store.put(key, (json.dumps(event, sort_keys=True, separators=(",", ":")) + "\n").encode())
            for key, event in named
        ]

    def events(self, day: str | None = None) -> list[dict[str, Any]]:
        """The stored events (of one ``YYYY-MM-DD`` day, or all), in key order."""
        prefix = f"{PARTITION_COLUMN}={day}/" if day else ""
        found = []
        for key in self.store.keys(prefix):
            body = self.store.get(key)
            if body is None:
                continue  # removed since it was listed
            try:
                event = json.loads(body)
            except json.JSONDecodeError as error:
                raise InvalidInputError(f"{self.store.location(key)} is not JSON: {error}") from None
            if not isinstance(event, dict):
                raise InvalidInputError(f"{self.store.location(key)} does not hold a JSON object")
            found.append(event)
        return found
