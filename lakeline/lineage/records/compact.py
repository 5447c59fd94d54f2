"""Fold a day's staged traces into its archive objects, so Athena opens a few objects per day, not one per root.

The trace and the TTL catcher write into the staging folder (``lakeline.lineage.records.archive``); nothing
reads it but this. ``compact_day`` lists the day's staged objects, and rewrites each archive object they belong
to whole: its lines, with every root (or expired item) present in staging replaced by its newest staged lines
(unless the trace archived there started later than the staged one). Then it deletes the staged objects it
read. So:

- a reader sees each archive object before or after a rewrite (``PutObject`` is atomic), never a root twice
  (its lines are in one object only, and replaced there) nor lost (staged objects go after the rewrite);
- a crash between the rewrite and the deletes leaves staged objects the next compaction folds again, to the
  same lines;
- each rewrite is conditional on the object being as read (S3 ``If-Match`` its ETag, ``If-None-Match`` for a
  new one): a compaction that another one (or a ``lakeline lineage trace`` on the same archive) overtook
  starts the day again instead of writing over what it did not read; it deletes only the staged keys it read,
  so a trace staged meanwhile waits for the next compaction.

An object of a day archived before the buckets (``dt=D/trace-<root>.jsonl``, ``dt=D/expired-...``) is read as
it is; a root staged again for that day is written back into it (its archive step names it), never into a
bucket beside it, where it would be read twice.

The hourly compaction (``lambdas/lineage_compact``) folds every staged day; the embedded runtime and
``lakeline lineage trace`` compact right after tracing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date

from lakeline.errors import LakelineError
from lakeline.lineage.records.archive import (
    PARTITION_COLUMN,
    ArchiveStore,
    _dumps,
    archive_step_id,
    bucket_index,
    bucket_object_key,
    day_prefix,
    parse_archive,
    staging_store,
    trace_object_key,
)

_HEADER = re.compile(rb'^\{"record_id":("(?:[^"\\]|\\.)*"),"root_id":("(?:[^"\\]|\\.)*"),"status":"([a-z_]+)"')
PARALLEL_READS = 16  # staged objects read (and deleted) at once
_STAGED_TRACE = re.compile(r"trace-.+-(\d{13})\.jsonl")

Unit = tuple[str, str]
"""What a line belongs to, replaced as a whole: ``(root_id, "")`` for a root's trace, ``(root_id, record_id)``
for an expired item."""


class CompactionConflict(LakelineError):
    """Other writers kept changing the day's archive objects while it was compacted."""


@dataclass(frozen=True)
class CompactionResult:
    day: date
    staged: list[str]
    written: list[str]
    attempts: int


@dataclass
class _Target:
    """One archive object and the staged lines going into it, by unit; for a trace, when it started (epoch s)."""

    lines: dict[Unit, list[bytes]] = field(default_factory=dict)
    traced_at: dict[Unit, int] = field(default_factory=dict)


def _unit(text: bytes, where: str) -> Unit:
    match = _HEADER.match(text)
    if match is not None:
        record, root, status = json.loads(match[1]), json.loads(match[2]), match[3].decode()
    else:  # written otherwise than by archive_body / render_expired: parse it whole
        (line,) = parse_archive(text, where=where)
        record, root, status = line.record_id, line.root_id, line.status
    return (root, record if status == "expired" else "")


def _relocate(text: bytes, location: str) -> bytes:
    """The line with its archive step naming ``location`` (a root written back into its pre-bucket object)."""
    data = json.loads(text)
    step = data["lineage"][-1]
    step["storage_location"] = location
    step["node_id"] = archive_step_id(location, data["record_id"])
    return _dumps(data).encode()


def _lines(body: bytes) -> list[bytes]:
    return [line for line in body.splitlines() if line.strip()]


def _staged_root(key: str) -> str:
    """The root a staged key belongs to, from its name (``trace-<root>-<ms>``, ``expired-<root>-<digest>``)."""
    name = key.rsplit("/", 1)[-1].removesuffix(".jsonl")
    kind, _, rest = name.partition("-")
    return rest.rsplit("-", 1)[0] if kind in ("trace", "expired") else rest


def _staged(staging: ArchiveStore, keys: list[str]) -> dict[Unit, tuple[str, str, list[bytes]]]:
    """For each unit in the staged ``keys``, the newest staged object's order (a trace's start, epoch ms), key
    and lines (read in parallel)."""
    newest: dict[Unit, tuple[str, str, list[bytes]]] = {}
    with ThreadPoolExecutor(PARALLEL_READS) as pool:
        bodies = list(pool.map(staging.get, keys))
    for key, body in zip(keys, bodies, strict=True):
        if body is None:  # deleted by a compaction that overtook this one
            continue
        trace = _STAGED_TRACE.fullmatch(key.rsplit("/", 1)[-1])
        order = trace[1] if trace else ""
        by_unit: dict[Unit, list[bytes]] = {}
        for text in _lines(body):
            by_unit.setdefault(_unit(text, key), []).append(text)
        for unit, lines in by_unit.items():
            if unit not in newest or newest[unit][0] <= order:
                newest[unit] = (order, key, lines)
    return newest


def _targets(archive: ArchiveStore, day: date, staged: dict[Unit, tuple[str, str, list[bytes]]]) -> dict[str, _Target]:
    present = set(archive.keys(day_prefix(day)))
    targets: dict[str, _Target] = {}
    for (root, record), (order, key, lines) in staged.items():
        # An archive written before the buckets keeps the root (or expired item) in its own object.
        legacy = trace_object_key(day, root) if not record else day_prefix(day) + key.rsplit("/", 1)[-1]
        into = legacy if legacy in present else bucket_object_key(day, root)
        if into == legacy:
            lines = [_relocate(text, archive.location(into)) for text in lines]
        target = targets.setdefault(into, _Target())
        target.lines[(root, record)] = lines
        if order:
            target.traced_at[(root, record)] = int(order) // 1000
    return targets


def _archived_at(text: bytes) -> int:
    """When the trace that wrote the line started: its archive step's ``recordedAt``."""
    return int(json.loads(text)["lineage"][-1].get("recordedAt") or 0)


def _merged(current: bytes, target: _Target, where: str) -> bytes:
    """``current``'s lines with each staged unit's replaced by the staged ones; a trace archived already by a
    trace that started later (an older trace whose write came late) is kept."""
    replaced = set(target.lines)
    present = [(text, _unit(text, where)) for text in _lines(current)]
    for text, unit in present:
        if unit in replaced and unit in target.traced_at and _archived_at(text) > target.traced_at[unit]:
            replaced.discard(unit)
    lines = [text for text, unit in present if unit not in replaced]
    lines += [text for unit, staged in target.lines.items() if unit in replaced for text in staged]
    return b"\n".join(lines) + b"\n" if lines else b""


def _compact_bucket(archive: ArchiveStore, day: date, keys: list[str], attempts: int) -> tuple[list[str], int]:
    """Fold the staged ``keys`` (roots of one bucket) into their archive objects, then delete them."""
    staging = staging_store(archive)
    for attempt in range(1, attempts + 1):
        written: list[str] = []
        overtaken = False
        for into, target in sorted(_targets(archive, day, _staged(staging, keys)).items()):
            current = archive.get_tagged(into)
            body = _merged(current[0] if current else b"", target, into)
            if current is not None and body == current[0]:
                continue
            if not archive.put_if(into, body, current[1] if current else None):
                overtaken = True
                break
            written.append(into)
        if not overtaken:
            with ThreadPoolExecutor(PARALLEL_READS) as pool:
                list(pool.map(staging.delete, keys))
            return written, attempt
    raise CompactionConflict(
        f"the lineage archive's {day_prefix(day)} kept changing while it was compacted ({attempts} attempts); "
        "its staged traces stay for the next compaction"
    )


def compact_day(
    archive: ArchiveStore, day: date, *, attempts: int = 5, keep_going: Callable[[], bool] = lambda: True
) -> CompactionResult:
    """Fold ``day``'s staged objects into its archive objects, then delete them (see the module), one bucket
    at a time: what is held in memory is one bucket's staged lines and archive object."""
    keys = staging_store(archive).keys(day_prefix(day))
    by_bucket: dict[int, list[str]] = {}
    for key in keys:
        by_bucket.setdefault(bucket_index(_staged_root(key)), []).append(key)
    written: list[str] = []
    tries = 0
    folded: list[str] = []
    for _, bucket_keys in sorted(by_bucket.items()):
        if not keep_going():
            break
        done, attempt = _compact_bucket(archive, day, bucket_keys, attempts)
        written.extend(done)
        folded.extend(bucket_keys)
        tries = max(tries, attempt)
    return CompactionResult(day, folded, sorted(written), tries)


def staged_days(archive: ArchiveStore) -> list[date]:
    """The days with staged objects (one listing of the staging folder's day prefixes)."""
    prefixes = staging_store(archive).partitions()
    return [date.fromisoformat(prefix.removeprefix(f"{PARTITION_COLUMN}=").rstrip("/")) for prefix in prefixes]


def compact_archive(archive: ArchiveStore, *, keep_going: Callable[[], bool] = lambda: True) -> list[CompactionResult]:
    """Compact every staged day, oldest first, while ``keep_going()`` (a Lambda's time left) says so."""
    results: list[CompactionResult] = []
    for day in staged_days(archive):
        if not keep_going():
            break
        results.append(compact_day(archive, day, keep_going=keep_going))
    return results
