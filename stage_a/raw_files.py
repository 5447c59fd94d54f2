"""Access to an arriving raw object, for the contract check at the door (``stage_a.contract``): its
size, a byte range (a Parquet footer), or a stream (a CSV or JSON file, read once, front to back); and
the copy in its table's column order and key spelling that the door writes next to a CSV or JSON file
(``stage_a.by_name``)."""

from __future__ import annotations

import filecmp
import io
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypedDict

from botocore.exceptions import ClientError

from lakeline.errors import LakelineError
from stage_a.arrivals import Arrival

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import CompletedPartTypeDef


@dataclass(frozen=True)
class LocalRawFile:
    path: Path

    @property
    def name(self) -> str:
        return str(self.path)

    def size(self) -> int:
        return self.path.stat().st_size

    def read_range(self, start: int, end: int) -> bytes:
        with self.path.open("rb") as handle:
            handle.seek(start)
            return handle.read(end - start)

    def open(self) -> IO[bytes]:
        return self.path.open("rb")


class RawFileChanged(LakelineError):
    """The object was replaced while the door read it: the newer version's own event brings it back."""


@dataclass
class S3RawFile:
    """An S3 object as it was when first asked for its size: every later read names that version's
    ETag, so a check and the copy made after it read the same bytes (``RawFileChanged`` otherwise)."""

    client: S3Client
    bucket: str
    key: str
    etag: str = ""

    @property
    def name(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def size(self) -> int:
        head = self.client.head_object(Bucket=self.bucket, Key=self.key)
        self.etag = self.etag or str(head.get("ETag", ""))
        return int(head["ContentLength"])

    def _get(self, **extra: str) -> Any:
        pinned = {"IfMatch": self.etag} if self.etag else {}
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self.key, **pinned, **extra)  # type: ignore[arg-type]
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("PreconditionFailed", "412"):
                raise RawFileChanged(f"{self.name} was replaced while it was read") from error
            raise

    def read_range(self, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        return bytes(self._get(Range=f"bytes={start}-{end - 1}")["Body"].read())

    def open(self) -> IO[bytes]:
        # Streamed as it arrives, through a buffered reader of our own: over HTTP, urllib3 closes the
        # response once it is read to the end, and botocore's StreamingBody then says it is closed, so a
        # TextIOWrapper reading lines straight from it fails with "I/O operation on closed file" on the
        # next line (found by the rehearsal; moto's in-process mock never closes its body).
        return io.BufferedReader(_StreamedBody(self._get()["Body"]))


class _StreamedBody(io.RawIOBase):
    """A response body read to its end once: after that, reads give nothing (whether or not the HTTP
    response below has closed itself)."""

    def __init__(self, body: Any) -> None:
        self._body = body
        self._ended = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._ended:
            return 0
        data = self._body.read(len(buffer))
        if not data:
            self._ended = True
            return 0
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._body.close()
        super().close()


@dataclass(frozen=True)
class ExistingCopy:
    """A by-name copy already in place: the version (sequencer) of the file it was made from ("" if it
    does not say), and its ETag, which a replacement must still match (``""``: not checked)."""

    made_from: str
    tag: str = ""


class CopyChanged(LakelineError):
    """Another writer replaced or created the copy since it was read: decide again."""


COPY_PART_BYTES = 8 * 1024 * 1024
"""A by-name copy is uploaded this much at a time (S3's parts are 5 MiB at least, 10,000 at most: 80 GB)."""
MADE_FROM = "lakeline-made-from"  # S3 metadata of a copy: the version (sequencer) of the file it was made from


@dataclass(frozen=True)
class LocalRawFiles:
    raw_dir: Path

    def raw_file(self, arrival: Arrival) -> LocalRawFile:
        return LocalRawFile(self.raw_dir / arrival.key)

    def existing_copy(self, arrival: Arrival, key: str) -> ExistingCopy | None:
        """A local copy records nothing (one flow writes them, one at a time): ``write_copy`` compares."""
        return ExistingCopy("") if (self.raw_dir / key).is_file() else None

    def write_copy(
        self, arrival: Arrival, key: str, body: IO[bytes], made_from: str, replacing: ExistingCopy | None
    ) -> bool:
        """Write ``body`` to ``key`` unless it holds those bytes already (a rerun); whole or not at all."""
        path = self.raw_dir / key
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".lakeline-", delete=False) as handle:
            shutil.copyfileobj(body, handle)
        staged = Path(handle.name)
        if path.is_file() and filecmp.cmp(path, staged, shallow=False):
            staged.unlink()
            return False
        staged.replace(path)
        return True


class _Condition(TypedDict, total=False):
    """What a copy's write requires of its place: nothing there yet, or still the copy that was read."""

    IfNoneMatch: str
    IfMatch: str


@dataclass(frozen=True)
class S3RawFiles:
    client: S3Client

    def raw_file(self, arrival: Arrival) -> S3RawFile:
        return S3RawFile(self.client, arrival.bucket, arrival.key)

    def existing_copy(self, arrival: Arrival, key: str) -> ExistingCopy | None:
        try:
            head = self.client.head_object(Bucket=arrival.bucket, Key=key)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        return ExistingCopy(head.get("Metadata", {}).get(MADE_FROM, ""), str(head.get("ETag", "")))

    def write_copy(
        self, arrival: Arrival, key: str, body: IO[bytes], made_from: str, replacing: ExistingCopy | None
    ) -> bool:
        """Put the copy only if the object at ``key`` is still what was read (none, or ``replacing``):
        two versions' routers never overwrite each other's decision. Its "Object Created" event brings
        the copy to the door like any file. A copy larger than one part is streamed up as a multipart
        upload, a part at a time (the router holds one part, never the copy, nor writes to ``/tmp``);
        one that fails part way (the file breaks its contract past the door's sample, or changed) is
        aborted, so nothing of it is ever seen."""
        condition: _Condition = {"IfNoneMatch": "*"} if replacing is None else {"IfMatch": replacing.tag}
        first = body.read(COPY_PART_BYTES)
        try:
            if len(first) < COPY_PART_BYTES:
                self.client.put_object(
                    Bucket=arrival.bucket, Key=key, Body=first, Metadata={MADE_FROM: made_from}, **condition
                )
            else:
                self._upload_in_parts(arrival.bucket, key, first, body, made_from, condition)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise CopyChanged(f"s3://{arrival.bucket}/{key} changed while it was written") from error
            raise
        return True

    def _upload_in_parts(
        self, bucket: str, key: str, first: bytes, body: IO[bytes], made_from: str, condition: _Condition
    ) -> None:
        upload = self.client.create_multipart_upload(Bucket=bucket, Key=key, Metadata={MADE_FROM: made_from})
        upload_id = upload["UploadId"]
        try:
            parts: list[CompletedPartTypeDef] = []
            part = first
            while part:
                number = len(parts) + 1
                sent = self.client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=part)
                parts.append({"PartNumber": number, "ETag": sent["ETag"]})
                part = body.read(COPY_PART_BYTES)
            # The condition is checked when the parts become the object: only then is anything replaced.
            self.client.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}, **condition
            )
        except BaseException:
            self.client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
            raise
