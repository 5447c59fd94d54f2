"""Nothing is lost to the TTL: archive items that DynamoDB expired before a trace archived them.

The table's stream carries each removed item's old image. Removals made by the TTL process carry
``userIdentity = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}``; every other removal
is left alone. A TTL-removed node counts as archived when its root's ``_traced`` item says a trace
started after the node was loaded, with a safety ``margin`` for clock skew between functions; when in
doubt it is archived again, since a duplicate line is harmless and a lost one is not.

Each such item gets its own staged object (``lakeline.lineage.records.archive.expired_object_key``), keyed
by root and node: a redelivered or retried stream record rewrites the same object; the compaction folds it
into the removal day's archive object of its root, as it does the traces. Bookkeeping items
(``_traced``, the schedule) are never archived.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from lakeline.lineage.records.archive import (
    DEFAULT_TRACE_ACTION,
    ArchiveStore,
    bucket_object_key,
    expired_object_key,
    render_expired,
    staging_store,
)
from lakeline.lineage.records.table import LOADED_AT, is_bookkeeping
from lakeline.lineage.records.tree import integer_value

TTL_PRINCIPAL = "dynamodb.amazonaws.com"


@dataclass(frozen=True)
class ExpirySettings:
    margin: timedelta = timedelta(minutes=2)
    trace_action: str = DEFAULT_TRACE_ACTION


@dataclass
class TracedLookup:
    """``traced_at`` of roots, fetched once per root per invocation."""

    fetch: Callable[[str], int | None]
    cache: dict[str, int | None] = field(default_factory=dict)

    def __call__(self, root_id: str) -> int | None:
        if root_id not in self.cache:
            self.cache[root_id] = self.fetch(root_id)
        return self.cache[root_id]


def removed_by_ttl(event_name: str, user_identity: Mapping[str, Any] | None) -> bool:
    return (
        event_name == "REMOVE"
        and user_identity is not None
        and user_identity.get("type") == "Service"
        and user_identity.get("principalId") == TTL_PRINCIPAL
    )


def was_archived(old_image: Mapping[str, Any], traced_at_ms: int | None, margin: timedelta) -> bool:
    loaded_at = integer_value(old_image.get(LOADED_AT))
    if traced_at_ms is None or loaded_at is None:
        return False
    return loaded_at <= traced_at_ms - int(margin.total_seconds() * 1000)


def archive_expired(
    old_image: Mapping[str, Any],
    removed_at: datetime,
    store: ArchiveStore,
    traced: Callable[[str], int | None],
    *,
    settings: ExpirySettings | None = None,
) -> str | None:
    """Archive one TTL-removed item unless a trace already did; return the key written, if any."""
    settings = settings or ExpirySettings()
    root_id, node_id = old_image.get("root_id"), old_image.get("node_id")
    if not isinstance(root_id, str) or not isinstance(node_id, str) or is_bookkeeping(node_id):
        return None
    if was_archived(old_image, traced(root_id), settings.margin):
        return None
    key = expired_object_key(removed_at.date(), root_id, node_id)
    location = store.location(bucket_object_key(removed_at.date(), root_id))
    body = render_expired(old_image, location=location, action=settings.trace_action, archived_at=removed_at)
    staging_store(store).put(key, body)
    return key
