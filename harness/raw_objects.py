"""Raw objects in the moto raw bucket for the arrivals a test sends: the stage A router reads each
arriving file at the door (``stage_a.contract``), as it reads it in AWS."""

from __future__ import annotations

import contextlib
import os
from typing import Any

import boto3
from botocore.exceptions import ClientError

from lakeline.settings import PipelineSettings
from stage_a.keys import InvalidKey, parse_raw_key

# Clients and bodies made within the current test's moto mock (cleared before every test by the autouse
# fixture in tests/conftest.py: a client made in another test's mock would not be mocked).
_clients: dict[tuple[str, str], Any] = {}  # (service, region)
_bodies: dict[tuple[str, str], bytes | None] = {}  # (database, table): None for a table Glue lacks
_buckets: set[str] = set()

SAMPLE_VALUES = {"bigint": "1", "int": "1", "double": "1.5", "boolean": "true", "date": "2022-01-20"}


def put_raw_object(key: str, bucket: str = "raw-bucket", region: str = "us-east-1") -> None:
    """Put a CSV at ``key`` that keeps its raw table's contract (a header and one row of the columns'
    types), as S3 has it when it sends the arrival's event. Keys that name no raw table in Glue, or
    are not raw keys at all, get nothing: those arrivals are refused before their file is read."""
    try:
        raw = parse_raw_key(key)
    except InvalidKey:
        return
    settings = PipelineSettings(
        raw_root="s3://raw/", stage_root="s3://stage/", environment=os.environ.get("PIPELINE_ENVIRONMENT")
    )
    database = settings.raw_database(raw.team, raw.dataset)
    if (database, raw.table) not in _bodies:
        _bodies[(database, raw.table)] = _sample(_client("glue", region), database, raw.table)
    body = _bodies[(database, raw.table)]
    if body is None:
        return
    s3 = _client("s3", region)
    if bucket not in _buckets:
        with contextlib.suppress(ClientError):  # there already
            s3.create_bucket(Bucket=bucket)
        _buckets.add(bucket)
    s3.put_object(Bucket=bucket, Key=key, Body=body)


def forget() -> None:
    _clients.clear()
    _bodies.clear()
    _buckets.clear()


def _client(service: str, region: str) -> Any:
    if (service, region) not in _clients:
        _clients[(service, region)] = boto3.client(service, region_name=region)  # type: ignore[call-overload]
    return _clients[(service, region)]


def _sample(glue: Any, database: str, table: str) -> bytes | None:
    """A header and one row of the table's columns' types; ``None`` for a table Glue does not have."""
    try:
        found = glue.get_table(DatabaseName=database, Name=table)["Table"]
    except ClientError:
        return None
    columns = found.get("StorageDescriptor", {}).get("Columns", [])
    header = ",".join(column["Name"] for column in columns)
    row = ",".join(SAMPLE_VALUES.get(column.get("Type", "string").lower(), "x") for column in columns)
    return f"{header}\n{row}\n".encode()
