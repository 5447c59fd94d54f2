"""Access to an arriving raw object, for the contract check at the door (``stage_a.contract``): its
size, a byte range (a Parquet footer), or a stream (a CSV or JSON file, read once, front to back); and
the copy in its table's column order that the door writes next to a CSV file (``stage_a.by_name``)."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, cast

from botocore.exceptions import ClientError

from stage_a.arrivals import Arrival

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


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


@dataclass(frozen=True)
class S3RawFile:
    client: S3Client
    bucket: str
    key: str

    @property
    def name(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def size(self) -> int:
        return int(self.client.head_object(Bucket=self.bucket, Key=self.key)["ContentLength"])

    def read_range(self, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        response = self.client.get_object(Bucket=self.bucket, Key=self.key, Range=f"bytes={start}-{end - 1}")
        return response["Body"].read()

    def open(self) -> IO[bytes]:
        # botocore's StreamingBody is an io.IOBase: it reads the object as it streams in.
        return cast(IO[bytes], self.client.get_object(Bucket=self.bucket, Key=self.key)["Body"])


MADE_FROM = "lakeline-made-from"  # S3 metadata of a copy: the digest of the arrival it was made from


@dataclass(frozen=True)
class LocalRawFiles:
    raw_dir: Path

    def raw_file(self, arrival: Arrival) -> LocalRawFile:
        return LocalRawFile(self.raw_dir / arrival.key)

    def copy_made_from(self, arrival: Arrival, key: str) -> str | None:
        """``None``: no file at ``key``. A local copy records nothing: ``write_copy`` compares contents."""
        return "" if (self.raw_dir / key).is_file() else None

    def write_copy(self, arrival: Arrival, key: str, body: IO[bytes], made_from: str) -> bool:
        """Write ``body`` to ``key`` unless it holds those bytes already (a rerun); whole or not at all."""
        path = self.raw_dir / key
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".lakeline-", delete=False) as handle:
            shutil.copyfileobj(body, handle)
        staged = Path(handle.name)
        if path.is_file() and path.read_bytes() == staged.read_bytes():
            staged.unlink()
            return False
        staged.replace(path)
        return True


@dataclass(frozen=True)
class S3RawFiles:
    client: S3Client

    def raw_file(self, arrival: Arrival) -> S3RawFile:
        return S3RawFile(self.client, arrival.bucket, arrival.key)

    def copy_made_from(self, arrival: Arrival, key: str) -> str | None:
        """What the copy at ``key`` records of its arrival (``""``: nothing); ``None``: no object there."""
        try:
            head = self.client.head_object(Bucket=arrival.bucket, Key=key)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        return head.get("Metadata", {}).get(MADE_FROM, "")

    def write_copy(self, arrival: Arrival, key: str, body: IO[bytes], made_from: str) -> bool:
        # Its "Object Created" event brings the copy to the door like any file.
        self.client.upload_fileobj(body, arrival.bucket, key, ExtraArgs={"Metadata": {MADE_FROM: made_from}})
        return True
