"""Object stores behind table locations: S3 in the cloud, a folder on disk locally.

Locations are ``s3://bucket/prefix/``, ``file:///abs/path/`` or a bare absolute path. They are paths,
never URLs: '#' and '?' are ordinary characters of an S3 key or a folder name, so every location is
split here (``parse_location``) and nowhere with ``urllib.parse``, which cuts a location at its first
'#' or '?' and so turns a run's prefix into a folder above it.

Stage A only ever lists data files, lists the child folders of a prefix, and deletes whole superseded
prefixes. Deleting is the one operation that can destroy data, so it has one entrance,
``ObjectStore.delete_prefix``, shared by every store: it deletes nothing but a run prefix
(``<table root>/[<col>=<value>/...]lakeline_run=<token>/``) under the table root the caller names (the
table's location in the catalog or the settings), compared folder by folder on the parsed forms.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import uuid
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, final

from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from lakeline.catalog_locations import CatalogLocations, CatalogUnreadable, local_catalog
from lakeline.errors import InvalidInputError, LakelineError
from lakeline.names import IDENTIFIER_PATTERN, PARTITION_VALUE_PATTERN

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import ObjectIdentifierTypeDef

RUN_PREFIX = "lakeline_run="
RUN_TOKEN_PATTERN = re.compile(r"^\d{8}t\d{12}_[0-9a-f]{10}$")
BUCKET_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")

COPY_FILES_AT_ONCE = 8
"""Files a carry copies side by side."""
COPY_TRANSFER = TransferConfig(multipart_threshold=64 * 1024**2, multipart_chunksize=64 * 1024**2, max_concurrency=4)
"""Each copy: parts of 64 MB (s3transfer raises the size to stay within S3's 10,000 parts), 4 at a time, so at
most ``COPY_FILES_AT_ONCE`` x 4 requests run at once: the S3 client's connection pool (``lakeline.aws.clients``)
holds that many."""


class ObjectMissing(LakelineError):
    """An object the pipeline wrote and relies on is not where it was written."""


class DeleteRefused(LakelineError):
    """A delete that did not happen: S3 answered a multi-object delete with objects it did not delete
    (refused, in AWS, per key), or the catalog points at the prefix (or cannot say whether it does)."""


@dataclass(frozen=True)
class Location:
    """A location split into its store and its path, exactly as written (nothing decoded or dropped)."""

    scheme: Literal["s3", "file"]
    bucket: str  # "" on the local disk
    path: str  # the S3 key, or the absolute local path

    @property
    def folders(self) -> tuple[str, ...]:
        """The path's parts between its leading and trailing '/' (an empty one means '//')."""
        inner = self.path.removeprefix("/").removesuffix("/")
        return tuple(inner.split("/")) if inner else ()

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.path}" if self.scheme == "s3" else f"file://{self.path}"

    def as_prefix(self) -> Location:
        """The same location ending with '/'."""
        return Location(self.scheme, self.bucket, self.path.rstrip("/") + "/")


def parse_location(location: str) -> Location:
    """Split ``s3://bucket/key``, ``file:///path``, ``file:/path`` (as Hadoop writes it) or ``/path``.

    The key or path is everything after the bucket or scheme: no query, no fragment, no decoding
    (``urlsplit(location, allow_fragments=False)`` would still cut an S3 key at its first '?')."""
    if not isinstance(location, str) or "\x00" in location:
        raise InvalidInputError(f"{location!r} is not a location")
    if location.startswith("s3://"):
        bucket, _, key = location[len("s3://") :].partition("/")
        if not BUCKET_PATTERN.fullmatch(bucket):
            raise InvalidInputError(f"{location!r} is not an s3://bucket/key location")
        return Location("s3", bucket, key)
    path = location
    if location.startswith("file:"):
        path = location[len("file:") :]
        if path.startswith("//"):
            path = path[len("//") :]
            if not path.startswith("/"):
                raise InvalidInputError(f"{location!r} names a host; local locations are file:///absolute/path")
    if not path.startswith("/"):
        raise InvalidInputError(f"{location!r} is not an s3:// location or an absolute local path")
    return Location("file", "", path)


def same_prefix(first: str, second: str) -> bool:
    """Whether two locations name the same prefix (``file:/x``, ``file:///x/`` and ``/x`` do)."""
    return parse_location(first).as_prefix() == parse_location(second).as_prefix()


def prefix_uri(location: str) -> str:
    """The one spelling of a prefix: its URI ending with '/'."""
    return parse_location(location).as_prefix().uri


def _partition_folder(folder: str) -> bool:
    name, equals, value = folder.partition("=")
    return bool(
        equals and IDENTIFIER_PATTERN.fullmatch(name) and PARTITION_VALUE_PATTERN.fullmatch(value) and ".." not in value
    )


def _run_prefix_problem(where: Location, root: Location) -> str | None:
    if (where.scheme, where.bucket) != (root.scheme, root.bucket):
        return f"it is not in the store of its table root {root.uri!r}"
    if any(folder in ("", ".", "..") for folder in (*where.folders, *root.folders)):
        return "its path has an empty, '.' or '..' folder"
    if not root.folders:
        return f"its table root {root.uri!r} is the top of a bucket or of the disk"
    if not where.path.endswith("/"):
        return "a run prefix ends with '/'"
    above, below = where.folders[: len(root.folders)], where.folders[len(root.folders) :]
    if above != root.folders or not below:
        return f"it is not below its table root {root.uri!r}"
    *partition, run = below
    if not run.startswith(RUN_PREFIX) or not RUN_TOKEN_PATTERN.fullmatch(run[len(RUN_PREFIX) :]):
        return f"its last folder {run!r} is not {RUN_PREFIX}<run token>"
    strange = [folder for folder in partition if not _partition_folder(folder)]
    if strange:
        return f"{strange[0]!r} between the table root and the run's folder is not a partition folder <column>=<value>"
    return None


def check_run_prefix(location: str, table_root: str) -> Location:
    """``location`` parsed, if it is a run prefix ``[<col>=<value>/...]lakeline_run=<token>/`` under
    ``table_root``; else an InvalidInputError naming it. Folder by folder on the parsed forms: no '#', '?',
    '..' or doubled '/' makes it mean a folder above the run's."""
    where, root = parse_location(location), parse_location(table_root)
    problem = _run_prefix_problem(where, root)
    if problem is not None:
        raise InvalidInputError(f"refusing to delete {location!r}: {problem}")
    return where


def _refuse_published(catalog: CatalogLocations, where: Location, root: Location, table: str) -> None:
    database, dot, name = table.partition(".")
    if not (dot and database and name):
        raise InvalidInputError(f"refusing to delete {where.uri!r}: {table!r} is not a database.table name")
    partition = dict(folder.partition("=")[::2] for folder in where.folders[len(root.folders) : -1])
    try:
        pointed = catalog.catalog_location(database, name, partition)
    except CatalogUnreadable as error:
        raise DeleteRefused(f"refusing to delete {where.uri}: {error}") from error
    if pointed and parse_location(pointed).as_prefix() == where.as_prefix():
        shown = " ".join(f"{key}={value}" for key, value in partition.items()) or "the table"
        raise DeleteRefused(
            f"refusing to delete {where.uri}: the catalog points {table} ({shown}) at it, so it is a published version"
        )


def table_root_of(partition_root: str, partition: Mapping[str, str]) -> str:
    """The location of the table above a partition's root: ``partition_root`` without its trailing
    ``<col>=<value>`` folders, which must be exactly ``partition``'s (in any order)."""
    where = parse_location(partition_root).as_prefix()
    count = len(partition)
    trailing = where.folders[len(where.folders) - count :] if count else ()
    if len(where.folders) <= count or sorted(trailing) != sorted(f"{k}={v}" for k, v in partition.items()):
        raise InvalidInputError(f"{partition_root!r} is not the root of partition {dict(partition)} of a table")
    kept = where.folders[: len(where.folders) - count]
    lead = "/" if where.scheme == "file" else ""
    return Location(where.scheme, where.bucket, lead + "/".join(kept) + "/").uri


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


MANIFEST_OBJECT = "manifest"


def manifest_prefix(run_location: str) -> str:
    """Where the run writing ``run_location`` (``<partition root>/lakeline_run=<token>/``) keeps its
    manifests: a sibling run prefix of its own, its token the run's time with a suffix fixed by the run.
    Outside the run's prefix (a CTAS needs an empty location), yet deleted as run prefixes are: by the
    run's failure path and by the sweep once nothing references it (``delete_prefix``'s guards hold)."""
    parent, _, run = prefix_uri(run_location).rstrip("/").rpartition("/")
    token = run.removeprefix(RUN_PREFIX)
    if not run.startswith(RUN_PREFIX) or not RUN_TOKEN_PATTERN.fullmatch(token):
        raise InvalidInputError(f"{run_location!r} is not a run prefix {RUN_PREFIX}<run token>")
    suffix = uuid.uuid5(uuid.NAMESPACE_URL, f"manifest:{token}").hex[:10]
    return f"{parent}/{RUN_PREFIX}{token[:21]}_{suffix}/"


def manifest_object(prefix: str, lines: list[str]) -> tuple[str, str]:
    """(folder, text) of a manifest of ``lines`` under ``prefix``, one a line, in a folder of its own named by
    its content (its one object is ``MANIFEST_OBJECT``): a plan made again with other content (a redelivery
    whose batch grew) never replaces the manifest a run already reads."""
    text = "".join(f"{line}\n" for line in lines)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return join_location(prefix, digest), text


def is_data_file(name: str) -> bool:
    """Data files, not markers: Spark and Hadoop write _SUCCESS, .crc and other hidden files."""
    return not name.startswith(("_", "."))


class ObjectStore(ABC):
    """A store of table data. Every store deletes through the one ``delete_prefix``."""

    @abstractmethod
    def list_data_files(self, location: str) -> list[str]:
        """Every data file below ``location`` (recursively), as URIs, sorted."""

    @abstractmethod
    def list_child_prefixes(self, location: str) -> list[str]:
        """The immediate child 'folders' of ``location``, as locations ending in '/', sorted."""

    @abstractmethod
    def carry_files(self, source: str, target: str, *, leave: Collection[str] = ()) -> int:
        """Give ``target`` a copy of every data file directly below ``source`` (same names) but those
        named in ``leave``, without reading them through this process; idempotent. Returns how many
        files were carried."""

    def write_text(self, location: str, text: str) -> None:
        """Write one object (a manifest) at ``location``, replacing what is there."""
        raise NotImplementedError(f"{type(self).__name__} does not write objects")

    def read_text(self, location: str) -> str:
        """The text of the object at ``location``; ``ObjectMissing`` if there is none."""
        raise NotImplementedError(f"{type(self).__name__} does not read objects")

    @final
    def delete_prefix(self, location: str, *, table_root: str, table: str) -> int:
        """Delete the run prefix ``location`` of ``table`` (``database.table``), whose location is
        ``table_root``, and everything below it; return how many objects were deleted. Anything but a run
        prefix is refused before a single object is touched (``check_run_prefix``), and so is a prefix the
        catalog points the table or its partition at (``DeleteRefused``): a published version, whatever
        the caller believes."""
        where = check_run_prefix(location, table_root)
        catalog = self._catalog(where)
        if catalog is not None:
            _refuse_published(catalog, where, parse_location(table_root), table)
        return self._delete(where)

    def _catalog(self, where: Location) -> CatalogLocations | None:
        """The catalog of the tables stored at ``where``; ``None``: none can point there."""
        return None

    @abstractmethod
    def _delete(self, where: Location) -> int:
        """Delete everything below ``where``, already checked to be a run prefix."""


def _local_path(location: str) -> Path:
    where = parse_location(location)
    if where.scheme != "file":
        raise InvalidInputError(f"{location!r} is not a local (file://) location")
    return Path(where.path)


class LocalObjectStore(ObjectStore):
    """A folder on disk, addressed with ``file://`` URIs; its tables are catalogued in the process's
    Spark metastore (``lakeline.catalog_locations.local_catalog``)."""

    def _catalog(self, where: Location) -> CatalogLocations | None:
        return local_catalog()

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

    def _delete(self, where: Location) -> int:
        root = Path(where.path)
        if not root.exists():
            return 0
        count = sum(1 for path in root.rglob("*") if path.is_file())
        shutil.rmtree(root)
        return count

    def write_text(self, location: str, text: str) -> None:
        path = _local_path(location)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def read_text(self, location: str) -> str:
        try:
            return _local_path(location).read_text(encoding="utf-8")
        except FileNotFoundError as error:
            raise ObjectMissing(f"{location} does not exist") from error

    def carry_files(self, source: str, target: str, *, leave: Collection[str] = ()) -> int:
        origin, destination = _local_path(source), _local_path(target)
        destination.mkdir(parents=True, exist_ok=True)
        carried = 0
        for path in sorted(origin.iterdir()) if origin.is_dir() else []:
            if not path.is_file() or not is_data_file(path.name) or path.name in leave:
                continue
            link = destination / path.name
            if link.exists():
                if not link.samefile(path):
                    raise InvalidInputError(f"cannot carry {path} into {destination}: another file has its name")
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
        where = parse_location(location)
        if where.scheme != "s3":
            raise InvalidInputError(f"{location!r} is not an s3:// location")
        return cls(where.bucket, where.path)


class S3ObjectStore(ObjectStore):
    """An S3 bucket, through a boto3 client passed in by the caller; ``catalog``: where its tables are
    catalogued (Glue), asked before every delete."""

    def __init__(self, client: S3Client, catalog: CatalogLocations | None = None) -> None:
        self._s3 = client
        self._tables = catalog

    def _catalog(self, where: Location) -> CatalogLocations | None:
        return self._tables

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

    def _delete(self, where: Location) -> int:
        deleted = 0
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=where.bucket, Prefix=where.path):
            keys: list[ObjectIdentifierTypeDef] = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            # One DeleteObjects call takes at most 1,000 keys, which is also a page's size.
            if keys:
                response = self._s3.delete_objects(Bucket=where.bucket, Delete={"Objects": keys, "Quiet": True})
                errors = response.get("Errors", [])
                if errors:
                    raise DeleteRefused(f"could not delete {len(errors)} objects under {where.uri}: {errors[0]}")
                deleted += len(keys)
        return deleted

    def write_text(self, location: str, text: str) -> None:
        where = S3Location.parse(location)
        self._s3.put_object(Bucket=where.bucket, Key=where.key, Body=text.encode())

    def read_text(self, location: str) -> str:
        where = S3Location.parse(location)
        try:
            body = self._s3.get_object(Bucket=where.bucket, Key=where.key)["Body"]
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in {"NoSuchKey", "404"}:
                raise ObjectMissing(f"{location} does not exist") from error
            raise
        return body.read().decode()

    def carry_files(self, source: str, target: str, *, leave: Collection[str] = ()) -> int:
        origin, destination = S3Location.parse(source), S3Location.parse(target)
        names: list[str] = []
        paginator = self._s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=origin.bucket, Prefix=origin.key, Delimiter="/"):
            for item in page.get("Contents", []):
                name = item["Key"][len(origin.key) :]
                if name and is_data_file(name) and name not in leave:
                    names.append(name)

        def carry(name: str) -> None:
            # A server-side copy, multipart above COPY_TRANSFER's threshold (so any size, past CopyObject's
            # 5 GB): no bytes pass through here.
            self._s3.copy(
                {"Bucket": origin.bucket, "Key": origin.key + name},
                destination.bucket,
                destination.key + name,
                Config=COPY_TRANSFER,
            )

        # Files are copied side by side: one at a time, a partition of hundreds of files or tens of GB
        # outlasts the commit function's time. Copying again is harmless (same names), so a retry after a
        # failure part-way copies everything again; the first error is raised once every copy has ended.
        with ThreadPoolExecutor(max_workers=COPY_FILES_AT_ONCE) as pool:
            for done in [pool.submit(carry, name) for name in names]:
                done.result()
        return len(names)


class SchemeObjectStore(ObjectStore):
    """S3 for ``s3://`` locations and the local disk for ``file://`` ones, so the same handler code
    serves a deployed pipeline and the embedded runtime."""

    def __init__(self, s3_client: S3Client, catalog: CatalogLocations | None = None) -> None:
        self._s3 = S3ObjectStore(s3_client, catalog)
        self._local = LocalObjectStore()

    def _for(self, location: str) -> LocalObjectStore | S3ObjectStore:
        return self._local if parse_location(location).scheme == "file" else self._s3

    def list_data_files(self, location: str) -> list[str]:
        return self._for(location).list_data_files(location)

    def list_child_prefixes(self, location: str) -> list[str]:
        return self._for(location).list_child_prefixes(location)

    def _catalog(self, where: Location) -> CatalogLocations | None:
        return self._for(where.uri)._catalog(where)

    def _delete(self, where: Location) -> int:
        return self._for(where.uri)._delete(where)

    def carry_files(self, source: str, target: str, *, leave: Collection[str] = ()) -> int:
        return self._for(target).carry_files(source, target, leave=leave)

    def write_text(self, location: str, text: str) -> None:
        self._for(location).write_text(location, text)

    def read_text(self, location: str) -> str:
        return self._for(location).read_text(location)
