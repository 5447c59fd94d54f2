"""The lineage archive: JSON Lines under ``dt=YYYY-MM-DD/``, in S3 or in a local folder.

One line per record, the seed's shape plus a ``status`` (see ``lakeline.lineage.records.tree``)::

    {"record_id": "<leaf node>", "root_id": "...", "status": "complete",
     "lineage": [{<top node>}, ..., {<leaf node>}, {<archive step>}]}

The archive step comes last, as the seed's compaction step: ``action_taken`` is the trace action
(``DATA_COMPACTION`` unless configured), ``storage_location`` the archive object, ``parent_id`` the
record, and its ``node_id`` is derived from the object and the record, so it is stable.

A day's lines are in ``ARCHIVE_BUCKETS`` objects, ``dt=<date>/part-<n>.jsonl``: a root's lines go to bucket
``bucket_index(root_id)`` (a hash, so the same bucket every day). The trace and the TTL catcher do not write
them: they write one object per root (or per expired item) into the staging folder ``_staged/`` beside the
day folders, which no reader of the table opens (Athena's partition projection reads ``dt=<date>/`` only,
Spark and Hive skip ``_`` folders), and ``lakeline.lineage.records.compact`` folds a day's staged objects into
its buckets. The archive step of a line names the bucket object it ends up in.

- ``_staged/dt=<trace date>/trace-<root_id>-<trace start, epoch ms>.jsonl``: a trace of a root; a redelivered
  trace writes another, the newest wins at compaction;
- ``_staged/dt=<removal date>/expired-<root_id>-<sha256(node_id)[:32]>.jsonl``: an item TTL deleted before it
  was archived, one object per item (a redelivered stream record rewrites it).

Archives written before the buckets hold ``dt=<date>/trace-<root_id>.jsonl`` and ``dt=<date>/expired-...``
objects directly in the day folder; they are read as they are, and a root staged again for such a day is
written back into its old object (see ``compact``), never beside it.

Objects are written whole (S3 ``PutObject``; locally a temporary file renamed into place), so a
reader never sees half an object. Rendering encodes every node once, however many lines share it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import ClientError

from lakeline.errors import InvalidInputError
from lakeline.lineage.records.model import NODE_NAMESPACE, uuid5_text
from lakeline.lineage.records.tree import STATUSES, LineageNode, LineageTree, Status
from lakeline.storage import S3Location

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

ARCHIVE_PREFIX = "archive/"
"""Where the trace writes the traced trees in the lineage archive bucket (the archive table's location)."""
DEFAULT_TRACE_ACTION = "DATA_COMPACTION"
LOCAL_ARCHIVE_FOLDER = "lineage-archive"  # inside a local workspace: <workspace>/lineage-archive/dt=.../
PARTITION_COLUMN = "dt"
NDJSON = "application/x-ndjson"
STAGING_FOLDER = "_staged"
"""Inside the archive's root, outside every day folder: where traces wait for the compaction."""
ARCHIVE_BUCKETS = 8
"""Objects per archive day. Never change it: a root staged again would go to another bucket than its lines."""


def day_prefix(day: date) -> str:
    return f"{PARTITION_COLUMN}={day.isoformat()}/"


def bucket_index(root_id: str) -> int:
    return int.from_bytes(hashlib.sha256(root_id.encode()).digest()[:8], "big") % ARCHIVE_BUCKETS


def bucket_object_key(day: date, root_id: str) -> str:
    """The archive object that holds ``root_id``'s lines of ``day``."""
    return f"{day_prefix(day)}part-{bucket_index(root_id)}.jsonl"


def trace_object_key(day: date, root_id: str) -> str:
    """A root's own object of ``day``, as archives written before the buckets hold it."""
    return f"{day_prefix(day)}trace-{root_id}.jsonl"


def staged_trace_key(day: date, root_id: str, traced_at: datetime) -> str:
    """A root's trace in the staging folder; the epoch milliseconds of the trace's start order its traces."""
    return f"{day_prefix(day)}trace-{root_id}-{int(traced_at.timestamp() * 1000):013d}.jsonl"


def expired_object_prefix(root_id: str) -> str:
    return f"expired-{root_id}-"


def expired_object_key(day: date, root_id: str, node_id: str) -> str:
    digest = hashlib.sha256(node_id.encode()).hexdigest()[:32]
    return f"{day_prefix(day)}{expired_object_prefix(root_id)}{digest}.jsonl"


def archive_step_id(location: str, record_id: str) -> str:
    return uuid5_text(NODE_NAMESPACE, f"archive\x1f{location}\x1f{record_id}")


def archive_step(*, root_id: str, record_id: str, location: str, action: str, archived_at: datetime) -> dict[str, Any]:
    """The archive (compaction) step appended as the last element of a line's lineage."""
    return {
        "root_id": root_id,
        "node_id": archive_step_id(location, record_id),
        "parent_id": record_id,
        "action_taken": action,
        "storage_location": location,
        "recordedAt": int(archived_at.timestamp()),
    }


_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _line_text(record_json: str, root_json: str, status: Status, lineage: Iterable[str]) -> str:
    """One archive line from already encoded parts (key order: the seed's, status before lineage)."""
    return f'{{"record_id":{record_json},"root_id":{root_json},"status":"{status}","lineage":[{",".join(lineage)}]}}'


def archive_body(tree: LineageTree, *, location: str, action: str, archived_at: datetime) -> bytes:
    """The archive object of a traced tree: one line per leaf, in depth-first order.

    Each node is encoded once, however many lines share it; the archive step's text is assembled
    around the only two fields that differ per line (its id and its parent, the record).
    """
    encoded: dict[str, str] = {}
    root_json = _dumps(tree.root_id)
    step_head = f'{{"root_id":{root_json},"node_id":"'
    step_tail = (
        f',"action_taken":{_dumps(action)},"storage_location":{_dumps(location)},'
        f'"recordedAt":{int(archived_at.timestamp())}}}'
    )
    nodes = tree.nodes
    lines: list[str] = []
    for line in tree.lines:
        parts: list[str] = []
        for node_id in line.path:
            text = encoded.get(node_id)
            if text is None:
                text = encoded[node_id] = _dumps(nodes[node_id].archive_dict())
            parts.append(text)
        record_json = _dumps(line.record_id)
        parts.append(f'{step_head}{archive_step_id(location, line.record_id)}","parent_id":{record_json}{step_tail}')
        lines.append(_line_text(record_json, root_json, line.status, parts))
    return ("\n".join(lines) + "\n").encode() if lines else b""


def render_expired(item: Mapping[str, Any], *, location: str, action: str, archived_at: datetime) -> bytes:
    """The archive object of one item removed by TTL before it was archived."""
    node = LineageNode.from_values(item)
    step = archive_step(
        root_id=node.root_id, record_id=node.node_id, location=location, action=action, archived_at=archived_at
    )
    lineage = [_dumps(node.archive_dict()), _dumps(step)]
    text = _line_text(_dumps(node.node_id), _dumps(node.root_id), "expired", lineage)
    return (text + "\n").encode()


@dataclass(frozen=True)
class ArchiveLine:
    record_id: str
    root_id: str
    status: Status
    lineage: list[dict[str, Any]]

    def nodes(self) -> list[LineageNode]:
        """The lineage without its last element, the archive step."""
        return [LineageNode.from_values(element) for element in self.lineage[:-1]]


def parse_archive(body: bytes, *, where: str = "archive object") -> list[ArchiveLine]:
    lines: list[ArchiveLine] = []
    for number, text in enumerate(body.decode().splitlines(), start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
            status = data.get("status", "complete")
            if status not in STATUSES:
                raise ValueError(f"unknown status {status!r}")
            lines.append(ArchiveLine(data["record_id"], data["root_id"], status, list(data["lineage"])))
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise InvalidInputError(f"{where} line {number} is not an archive line: {error}") from None
    return lines


class ArchiveStore(Protocol):
    """Where archive objects go; keys are relative to the archive's root (the Glue table location)."""

    def root_location(self) -> str: ...

    def location(self, key: str) -> str: ...

    def put(self, key: str, body: bytes) -> str:
        """Write the whole object (replacing it); return its location."""
        ...

    def get(self, key: str) -> bytes | None: ...

    def get_tagged(self, key: str) -> tuple[bytes, str] | None:
        """The object and a tag that changes whenever it is written (S3: its ETag)."""
        ...

    def put_if(self, key: str, body: bytes, tag: str | None) -> bool:
        """Write the whole object only if it still has ``tag`` (``None``: only if it does not exist)."""
        ...

    def delete(self, key: str) -> None:
        """Remove the object (none there is no error)."""
        ...

    def keys(self, prefix: str = "") -> list[str]:
        """Keys that start with ``prefix``, sorted; none in a folder whose name starts with ``_`` or ``.``."""
        ...

    def partitions(self) -> list[str]:
        """The ``dt=YYYY-MM-DD/`` prefixes present, sorted."""
        ...

    def folder(self, name: str) -> ArchiveStore:
        """The store of the folder ``name`` inside this one (its keys relative to it)."""
        ...


def _hidden(key: str) -> bool:
    return any(part.startswith(("_", ".")) for part in key.split("/"))


class LocalArchiveStore:
    """A folder, e.g. ``<workspace>/lineage-archive``, standing in for the archive bucket."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root) or path == self.root:
            raise InvalidInputError(f"archive key {key!r} leaves the archive folder")
        return path

    def root_location(self) -> str:
        return self.root.as_uri().rstrip("/") + "/"

    def location(self, key: str) -> str:
        # Keys use only URI-safe characters; '=' stays readable (as_uri would write %3D).
        return self.root_location() + self._path(key).relative_to(self.root).as_posix()

    def put(self, key: str, body: bytes) -> str:
        path = self._path(key)
        for attempt in range(3):  # a compaction may remove the folder emptied of staged objects meanwhile
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                # Hidden temporary name: Spark and Hive skip files starting with '.' while it exists.
                handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
                break
            except FileNotFoundError:
                if attempt == 2:
                    raise
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(body)
            Path(temporary).replace(path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                Path(temporary).unlink()
            raise
        return self.location(key)

    def get(self, key: str) -> bytes | None:
        path = self._path(key)
        return path.read_bytes() if path.is_file() else None

    def get_tagged(self, key: str) -> tuple[bytes, str] | None:
        body = self.get(key)
        return None if body is None else (body, hashlib.sha256(body).hexdigest())

    def put_if(self, key: str, body: bytes, tag: str | None) -> bool:
        self.root.mkdir(parents=True, exist_ok=True)
        # One writer at a time compares and replaces (a lock file, hidden from the readers).
        with (self.root / ".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            current = self.get_tagged(key)
            if (current[1] if current else None) != tag:
                return False
            self.put(key, body)
            return True

    def delete(self, key: str) -> None:
        path = self._path(key)
        path.unlink(missing_ok=True)
        # An emptied folder goes too, as an S3 prefix without objects does (a day no longer listed).
        for folder in path.parents:
            if folder == self.root or not folder.is_relative_to(self.root):
                break
            with contextlib.suppress(OSError):
                folder.rmdir()

    def keys(self, prefix: str = "") -> list[str]:
        if not self.root.is_dir():
            return []
        found = []
        for path in self.root.rglob("*"):
            relative = path.relative_to(self.root).as_posix()
            if path.is_file() and not _hidden(relative) and relative.startswith(prefix):
                found.append(relative)
        return sorted(found)

    def folder(self, name: str) -> LocalArchiveStore:
        return LocalArchiveStore(self._path(name))

    def partitions(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(
            f"{path.name}/"
            for path in self.root.iterdir()
            if path.is_dir() and path.name.startswith(f"{PARTITION_COLUMN}=")
        )


class S3ArchiveStore:
    """The archive bucket (or a prefix in it), through a client passed in."""

    def __init__(self, s3: S3Client, bucket: str, prefix: str = "") -> None:
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        self._s3 = s3
        self.bucket = bucket
        self.prefix = prefix.lstrip("/")

    @classmethod
    def at(cls, s3: S3Client, location: str) -> S3ArchiveStore:
        where = S3Location.parse(location)
        return cls(s3, where.bucket, where.key)

    def root_location(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def location(self, key: str) -> str:
        return f"s3://{self.bucket}/{self.prefix}{key}"

    def put(self, key: str, body: bytes) -> str:
        self._s3.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=body, ContentType=NDJSON)
        return self.location(key)

    def get(self, key: str) -> bytes | None:
        found = self.get_tagged(key)
        return found[0] if found is not None else None

    def get_tagged(self, key: str) -> tuple[bytes, str] | None:
        try:
            response = self._s3.get_object(Bucket=self.bucket, Key=self.prefix + key)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise
        return response["Body"].read(), response["ETag"]

    def put_if(self, key: str, body: bytes, tag: str | None) -> bool:
        """S3's conditional write: ``If-Match`` the ETag read, or ``If-None-Match: *`` for a new object."""
        key = self.prefix + key
        try:
            if tag is None:
                self._s3.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType=NDJSON, IfNoneMatch="*")
            else:
                self._s3.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType=NDJSON, IfMatch=tag)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict"):
                return False
            raise
        return True

    def delete(self, key: str) -> None:
        self._s3.delete_object(Bucket=self.bucket, Key=self.prefix + key)

    def keys(self, prefix: str = "") -> list[str]:
        found: list[str] = []
        paginator = self._s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + prefix):
            found.extend(item["Key"][len(self.prefix) :] for item in page.get("Contents", []))
        return sorted(key for key in found if not _hidden(key))

    def folder(self, name: str) -> S3ArchiveStore:
        return S3ArchiveStore(self._s3, self.bucket, f"{self.prefix}{name.strip('/')}/")

    def partitions(self) -> list[str]:
        found: list[str] = []
        paginator = self._s3.get_paginator("list_objects_v2")
        pages = paginator.paginate(Bucket=self.bucket, Prefix=f"{self.prefix}{PARTITION_COLUMN}=", Delimiter="/")
        for page in pages:
            found.extend(item["Prefix"][len(self.prefix) :] for item in page.get("CommonPrefixes", []))
        return sorted(found)


def staging_store(store: ArchiveStore) -> ArchiveStore:
    return store.folder(STAGING_FOLDER)


def root_archive_keys(store: ArchiveStore, root_id: str, day: date | None = None) -> list[str]:
    """Every archive object that may hold lines of ``root_id`` (all dates, or one): its bucket of each day and
    the objects of its own an archive written before the buckets has."""
    days = [day_prefix(day)] if day is not None else store.partitions()
    bucket = f"part-{bucket_index(root_id)}.jsonl"
    keys: list[str] = []
    for prefix in days:
        present = store.keys(prefix)
        own = (prefix + bucket, f"{prefix}trace-{root_id}.jsonl")
        keys.extend(key for key in present if key in own or key.startswith(prefix + expired_object_prefix(root_id)))
    return keys


def read_root_lines(store: ArchiveStore, root_id: str, day: date | None = None) -> list[ArchiveLine]:
    needle = f'"root_id":{_dumps(root_id)}'.encode()
    lines: list[ArchiveLine] = []
    for key in root_archive_keys(store, root_id, day):
        body = store.get(key)
        if body is not None:
            # A bucket holds many roots: only the lines that name this one are parsed.
            mine = b"\n".join(line for line in body.splitlines() if needle in line)
            lines.extend(line for line in parse_archive(mine, where=key) if line.root_id == root_id)
    return lines


def open_archive(destination: str, s3_factory: Any = None) -> ArchiveStore:
    """An archive store from ``s3://bucket/prefix/`` (client from ``s3_factory()``) or a folder path."""
    if destination.startswith("s3://"):
        if s3_factory is None:
            raise InvalidInputError("an s3:// archive needs an S3 client")
        return S3ArchiveStore.at(s3_factory(), destination)
    if "://" in destination and not destination.startswith("file://"):
        raise InvalidInputError(f"archive {destination!r} must be an s3:// location or a local folder")
    return LocalArchiveStore(Path(destination.removeprefix("file://")))
