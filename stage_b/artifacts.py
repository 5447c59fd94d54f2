"""Step SQL files in the artifacts bucket: ``artifacts/athena_queries/<team>/<sql_file>``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from lakeline.errors import InvalidInputError
from lakeline.names import check_identifier

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

ARTIFACTS_PREFIX = "artifacts/athena_queries"


def s3_sql_reader(s3: S3Client, bucket: str, team: str) -> Callable[[str], str]:
    check_identifier(team, "team")

    def read(name: str) -> str:
        key = f"{ARTIFACTS_PREFIX}/{team}/{name}"
        try:
            return s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8")
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code in ("NoSuchKey", "404"):
                raise InvalidInputError(f"sql_file {name!r}: no s3://{bucket}/{key}") from error
            raise

    return read
