"""The local Athena's S3 mirror: moto's S3 objects as files Spark reads and writes.

Spark here cannot read ``s3://``: each ``s3://bucket/key`` is the file ``<root>/bucket/key``. Before a query,
``pull`` brings a bucket's objects that changed into the mirror and removes the files of objects S3 lost;
after it, ``push`` puts the files the query wrote into S3 and deletes the objects whose files it removed.
Spark's hidden files (``_SUCCESS``, ``.crc``, ``_temporary``) stay local.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakeline.runtimes.deployed.local_aws.athena_statements import LocalAthenaError

logger = logging.getLogger("lakeline.runtimes.deployed.local_aws.athena")


@dataclass(frozen=True)
class Mirrored:
    """An object as last brought into or out of the mirror: its S3 ETag and its file's stat."""

    etag: str
    mtime_ns: int
    size: int


class S3Mirror:
    """moto's S3 ↔ the files under ``root`` (one folder a bucket), with what each object was when it was last
    brought in or out, so that only what changed is copied."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.objects: dict[tuple[str, str], Mirrored] = {}

    def file(self, bucket: str, key: str) -> Path:
        return self.root / bucket / key

    def pull(self, s3: Any, bucket: str) -> None:
        """Bring the bucket's objects that changed in moto's S3 into the mirror; remove what S3 lost."""
        from moto.s3.models import FakeKey

        found = s3.buckets.get(bucket)
        objects = {}
        if found is not None:
            objects = {k: v for k, v in found.keys.items() if isinstance(v, FakeKey) and not k.endswith("/")}
        for key, item in objects.items():
            path = self.file(bucket, key)
            known = self.objects.get((bucket, key))
            if known is not None and known.etag == item.etag and _same_file(path, known):
                continue
            item, value = _read_now(found, key, item)
            if item is None:  # deleted since the listing: S3 lost it, as the removal below does next time
                continue
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(value)
            except OSError as error:  # a key that is also a "folder" of other keys: no file can hold both
                logger.warning("local Athena cannot mirror s3://%s/%s: %s", bucket, key, error)
                continue
            stat = path.stat()
            self.objects[(bucket, key)] = Mirrored(item.etag, stat.st_mtime_ns, stat.st_size)
        for gone in [k for k in self.objects if k[0] == bucket and k[1] not in objects]:
            with contextlib.suppress(FileNotFoundError):
                self.file(*gone).unlink()
            del self.objects[gone]
        _prune(self.root / bucket, {self.file(b, k) for b, k in self.objects if b == bucket})

    def push(self, s3: Any, bucket: str) -> None:
        """Put the files a query wrote into moto's S3; delete the objects whose files it removed."""
        from moto.s3.models import FakeKey

        root = self.root / bucket
        seen: set[str] = set()
        for path in visible_files(root):
            key = path.relative_to(root).as_posix()
            seen.add(key)
            known = self.objects.get((bucket, key))
            if known is not None and _same_file(path, known):
                continue
            stat = path.stat()
            try:
                stored = s3.put_object(bucket, key, path.read_bytes())
            except Exception as error:  # no such bucket: Athena fails to write there as well
                raise LocalAthenaError(f"cannot write s3://{bucket}/{key}: {type(error).__name__}") from error
            self.objects[(bucket, key)] = Mirrored(stored.etag, stat.st_mtime_ns, stat.st_size)
        for bucket_key in [k for k in self.objects if k[0] == bucket and k[1] not in seen]:
            if self.file(*bucket_key).exists():
                continue  # a hidden file from S3, left as it is
            known = self.objects.pop(bucket_key)
            found = s3.buckets.get(bucket)
            current = found.keys.get(bucket_key[1]) if found is not None else None
            if isinstance(current, FakeKey) and current.etag == known.etag:  # not replaced meanwhile
                s3.delete_object(bucket, bucket_key[1])


def _read_now(bucket: Any, key: str, item: Any) -> tuple[Any, bytes]:
    """The content of ``key`` (moto's ``FakeKey`` ``item``, listed a moment ago) and the key it was read from. A
    key overwritten or deleted by another request since the listing has its buffer closed by moto (``ValueError``):
    its current version is read instead; ``(None, b"")`` if it is gone."""
    from moto.s3.models import FakeKey

    for _ in range(5):
        try:
            return item, item.value
        except ValueError:
            item = bucket.keys.get(key)
            if not isinstance(item, FakeKey):  # gone, or a delete marker
                return None, b""
    return item, item.value


def _same_file(path: Path, known: Mirrored) -> bool:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return False
    return (stat.st_mtime_ns, stat.st_size) == (known.mtime_ns, known.size)


def _hidden(name: str) -> bool:
    """Hadoop's and Hive's hidden files: Spark's ``_SUCCESS``, ``.crc`` files, ``_temporary``."""
    return name.startswith(("_", "."))


def visible_files(root: Path) -> Iterator[Path]:
    if not root.is_dir():
        return
    for folder, folders, files in os.walk(root):
        folders[:] = [name for name in folders if not _hidden(name)]
        for name in files:
            if not _hidden(name):
                yield Path(folder) / name


def _prune(root: Path, mirrored: set[Path]) -> None:
    """Remove what Spark left in the folders that hold no visible file any more: a prefix whose objects
    were deleted from S3 is empty there, and Spark, which refuses a CTAS into a folder with files (as
    Athena refuses a non-empty location), must find it so, not holding its own ``_SUCCESS`` and ``.crc``
    files. A file mirrored from S3 (``mirrored``, whatever its name) is S3's and stays."""
    if not root.is_dir():
        return
    for folder, _, _ in sorted(os.walk(root), key=lambda walked: -len(Path(walked[0]).parts)):
        path = Path(folder)
        if path == root or any(visible_files(path)) or not path.is_dir():
            continue
        leftovers = [item for item in path.rglob("*") if item.is_file()]
        if any(item in mirrored for item in leftovers):
            continue
        shutil.rmtree(path, ignore_errors=True)
