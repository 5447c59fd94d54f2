"""Object stores behind table locations: S3 in the cloud, a folder on disk locally.

Locations are URIs ending in '/': ``s3://bucket/prefix/`` or ``file:///abs/path/``. Stage A only ever
lists data files, lists the child folders of a prefix, and deletes whole superseded prefixes.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlparse

from lakeline.errors import ValidationError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import ObjectIdentifierTypeDef


def join_location(root: str, *parts: str) -> str:
    """Join a location root and relative parts, always ending with '/'."""
    location = root.rstrip("/")
    for part in parts:
        location += "/" + part.strip("/")
    return location + "/"


def local_uri(path: Path) -> str:
    """``file://`` + the absolute path, unescaped as Spark and Hadoop write it (not ``Path.as_uri``,
    which would percent-encode the '=' of every partition folder)."""
    return "file://" + str(path.resolve())


def normalize_location(location: str) -> str:
    """Hadoop writes local paths as ``file:/x``; Lakeline's locations are URIs, ``file:///x``."""
    if location.startswith("file:/") and not location.startswith("file://"):
        return "file://" + location[len("file:") :]
    return location


def local_root(path: Path) -> str:
    """The ``file://`` location of a local folder, ending in '/'."""
    return local_uri(path).rstrip("/") + "/"


def is_data_file(name: str) -> bool:
    """Data files, not markers: Spark and Hadoop write _SUCCESS, .crc and other hidden files."""
    return not name.startswith(("_", "."))


class ObjectStore(Protocol):
    def list_data_files(self, location: str) -> list[str]:
        """Every data file below ``location`` (recursively), as URIs, sorted."""
        ...

    def list_child_prefixes(self, location: str) -> list[str]:
        """The immediate child 'folders' of ``location``, as locations ending in '/', sorted."""
        ...

    def delete_prefix(self, location: str) -> int:
        """Delete everything below ``location``; return how many objects were deleted."""
        ...

    def carry_files(self, source: str, target: str) -> int:
        """Give ``target`` a copy of every data file directly below ``source`` (same names), without
        reading them through this process; idempotent. Returns how many files were carried."""
        ...


def _local_path(location: str) -> Path:
    parsed = urlparse(location)
    if parsed.scheme not in ("file", ""):
        raise ValidationError(f"{location!r} is not a local (file://) location")
    return Path(parsed.path)


class LocalObjectStore:
    """A folder on disk, addressed with ``file://`` URIs."""

    def list_data_files(self, location: str) -> list[str]:
        root = _local_path(location)
        if not root.exists():
            return []
        return sorted(
            local_uri(path)
            for path in root.rglob("*")
            if path.is_file() and all(is_data_file(part) for part in path.relative_to(root).parts)
        )

    def list_child_prefixes(self, location: str) -> list[str]:
        root = _local_path(location)
        if not root.is_dir():
            return []
        return sorted(local_root(child) for child in root.iterdir() if child.is_dir())

    def delete_prefix(self, location: str) -> int:
        root = _local_path(location)
        if not root.exists():
            return 0
        count = sum(1 for path in root.rglob("*") if path.is_file())
        shutil.rmtree(root)
        return count

    def carry_files(self, source: str, target: str) -> int:
        origin, destination = _local_path(source), _local_path(target)
        destination.mkdir(parents=True, exist_ok=True)
        carried = 0
        for path in sorted(origin.iterdir()) if origin.is_dir() else []:
            if not path.is_file() or not is_data_file(path.name):
                continue
            link = destination / path.name
            if link.exists():
                if not link.samefile(path):
                    raise ValidationError(f"cannot carry {path} into {destination}: another file has its name")
            else:
                # A hard link: O(1) whatever the file's size, and the file lives on while either name does.
                try:
                    link.hardlink_to(path)
                except OSError:
                    shutil.copy2(path, link)
            carried += 1
        return carried


@dataclass
class S3Location:
    bucket: str
    key: str

    @classmethod
    def parse(cls, location: str) -> S3Location:
        parsed = urlparse(location)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise ValidationError(f"{location!r} is not an s3:// location")
        return cls(parsed.netloc, parsed.path.lstrip("/"))


class S3ObjectStore:
    """An S3 bucket, through a boto3 client passed in by the caller."""

    def __init__(self, client: S3Client) -> None:
        self._s3 = client

    def list_data_files(self, location: str) -> list[str]:
        where = S3Location.parse(location)
        files: list[str] = []
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=where.bucket, Prefix=where.key):
            for item in page.get("Contents", []):
                relative = item["Key"][len(where.key) :]
                if all(is_data_file(part) for part in relative.split("/") if part):
                    files.append(f"s3://{where.bucket}/{item['Key']}")
        return sorted(files)

    def list_child_prefixes(self, location: str) -> list[str]:
        where = S3Location.parse(location)
        prefixes: list[str] = []
        paginator = self._s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=where.bucket, Prefix=where.key, Delimiter="/"):
            prefixes.extend(f"s3://{where.bucket}/{p['Prefix']}" for p in page.get("CommonPrefixes", []))
        return sorted(prefixes)

    def delete_prefix(self, location: str) -> int:
        where = S3Location.parse(location)
        deleted = 0
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=where.bucket, Prefix=where.key):
            keys: list[ObjectIdentifierTypeDef] = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            # One DeleteObjects call takes at most 1,000 keys, which is also a page's size.
            if keys:
                response = self._s3.delete_objects(Bucket=where.bucket, Delete={"Objects": keys, "Quiet": True})
                errors = response.get("Errors", [])
                if errors:
                    raise RuntimeError(f"could not delete {len(errors)} objects under {location}: {errors[0]}")
                deleted += len(keys)
        return deleted

    def carry_files(self, source: str, target: str) -> int:
        origin, destination = S3Location.parse(source), S3Location.parse(target)
        carried = 0
        paginator = self._s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=origin.bucket, Prefix=origin.key, Delimiter="/"):
            for item in page.get("Contents", []):
                name = item["Key"][len(origin.key) :]
                if not name or not is_data_file(name):
                    continue
                # A server-side copy (multipart above 8 MB, so any object size): no bytes pass through here.
                self._s3.copy({"Bucket": origin.bucket, "Key": item["Key"]}, destination.bucket, destination.key + name)
                carried += 1
        return carried


class SchemeObjectStore:
    """S3 for ``s3://`` locations and the local disk for ``file://`` ones, so the same handler code
    serves a deployed pipeline and the embedded runtime."""

    def __init__(self, s3_client: S3Client) -> None:
        self._s3 = S3ObjectStore(s3_client)
        self._local = LocalObjectStore()

    def _for(self, location: str) -> ObjectStore:
        return self._local if location.startswith("file:") else self._s3

    def list_data_files(self, location: str) -> list[str]:
        return self._for(location).list_data_files(location)

    def list_child_prefixes(self, location: str) -> list[str]:
        return self._for(location).list_child_prefixes(location)

    def delete_prefix(self, location: str) -> int:
        return self._for(location).delete_prefix(location)

    def carry_files(self, source: str, target: str) -> int:
        return self._for(target).carry_files(source, target)
