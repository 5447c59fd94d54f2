"""The lineage archive: JSON Lines under ``dt=YYYY-MM-DD/``, in S3 or in a local folder.

One line per record, the seed's shape plus a ``status`` (see ``lakeline.lineage.records.tree``)::

    {"record_id": "<leaf node>", "root_id": "...", "status": "complete",
     "lineage": [{<top node>}, ..., {<leaf node>}, {<archive step>}]}

The archive step comes last, as the seed's compaction step: ``action_taken`` is the trace action
(``DATA_COMPACTION`` unless configured), ``storage_location`` the archive object, ``parent_id`` the
record, and its ``node_id`` is derived from the object and the record, so it is stable.

Object keys are deterministic, so writing again replaces instead of adding lines:

- ``dt=<trace date>/trace-<root_id>.jsonl``: the nightly trace of a root, one object per root per date;
- ``dt=<removal date>/expired-<root_id>-<sha256(node_id)[:32]>.jsonl``: an item TTL deleted before it
  was archived, one object per item.

Objects are written whole (S3 ``PutObject``; locally a temporary file renamed into place), so a
reader never sees half an object. Rendering encodes every node once, however many lines share it.
"""

from __future__ import annotations

import contextlib
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


def day_prefix(day: date) -> str:
    return f"{PARTITION_COLUMN}={day.isoformat()}/"


def trace_object_key(day: date, root_id: str) -> str:
    return f"{day_prefix(day)}trace-{root_id}.jsonl"


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

    def keys(self, prefix: str = "") -> list[str]:
        """Keys that start with ``prefix``, sorted."""
        ...

    def partitions(self) -> list[str]:
        """The ``dt=YYYY-MM-DD/`` prefixes present, sorted."""
        ...


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
        path.parent.mkdir(parents=True, exist_ok=True)
        # Hidden temporary name: Spark and Hive skip files starting with '.' while it exists.
        handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
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

    def keys(self, prefix: str = "") -> list[str]:
        if not self.root.is_dir():
            return []
        found = []
        for path in self.root.rglob("*"):
            relative = path.relative_to(self.root).as_posix()
            if path.is_file() and not path.name.startswith(".") and relative.startswith(prefix):
                found.append(relative)
        return sorted(found)

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
        self._s3.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=body, ContentType="application/x-ndjson")
        return self.location(key)

    def get(self, key: str) -> bytes | None:
        try:
            response = self._s3.get_object(Bucket=self.bucket, Key=self.prefix + key)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise
        return response["Body"].read()

    def keys(self, prefix: str = "") -> list[str]:
        found: list[str] = []
        paginator = self._s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + prefix):
            found.extend(item["Key"][len(self.prefix) :] for item in page.get("Contents", []))
        return sorted(found)

    def partitions(self) -> list[str]:
        found: list[str] = []
        paginator = self._s3.get_paginator("list_objects_v2")
        pages = paginator.paginate(Bucket=self.bucket, Prefix=f"{self.prefix}{PARTITION_COLUMN}=", Delimiter="/")
        for page in pages:
            found.extend(item["Prefix"][len(self.prefix) :] for item in page.get("CommonPrefixes", []))
        return sorted(found)


def root_archive_keys(store: ArchiveStore, root_id: str, day: date | None = None) -> list[str]:
    """Every archive object holding lines of ``root_id`` (all dates, or one)."""
    days = [day_prefix(day)] if day is not None else store.partitions()
    keys: list[str] = []
    for prefix in days:
        trace_key = f"{prefix}trace-{root_id}.jsonl"
        keys.extend(key for key in store.keys(trace_key) if key == trace_key)
        keys.extend(store.keys(prefix + expired_object_prefix(root_id)))
    return keys


def read_root_lines(store: ArchiveStore, root_id: str, day: date | None = None) -> list[ArchiveLine]:
    lines: list[ArchiveLine] = []
    for key in root_archive_keys(store, root_id, day):
        body = store.get(key)
        if body is not None:
            lines.extend(line for line in parse_archive(body, where=key) if line.root_id == root_id)
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
