"""Read access to an arriving raw object, for the contract check at the door (``stage_a.contract``):
its size, a byte range (a Parquet footer), or a stream (a CSV or JSON file, read once, front to back)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, cast

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


@dataclass(frozen=True)
class LocalRawFiles:
    raw_dir: Path

    def raw_file(self, arrival: Arrival) -> LocalRawFile:
        return LocalRawFile(self.raw_dir / arrival.key)


@dataclass(frozen=True)
class S3RawFiles:
    client: S3Client

    def raw_file(self, arrival: Arrival) -> S3RawFile:
        return S3RawFile(self.client, arrival.bucket, arrival.key)
