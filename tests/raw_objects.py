"""Raw objects in the moto raw bucket for the arrivals a test sends: the stage A router reads each
arriving file at the door (``stage_a.contract``), as it reads it in AWS."""

from __future__ import annotations

import contextlib
import os

import boto3
from botocore.exceptions import ClientError

from lakeline.settings import PipelineSettings
from stage_a.keys import InvalidKey, parse_raw_key

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
    glue = boto3.client("glue", region_name=region)
    try:
        table = glue.get_table(DatabaseName=settings.raw_database(raw.team, raw.dataset), Name=raw.table)["Table"]
    except (ClientError, ValueError):
        return
    columns = table.get("StorageDescriptor", {}).get("Columns", [])
    header = ",".join(column["Name"] for column in columns)
    row = ",".join(SAMPLE_VALUES.get(column.get("Type", "string").lower(), "x") for column in columns)
    s3 = boto3.client("s3", region_name=region)
    with contextlib.suppress(ClientError):  # there already
        s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key=key, Body=f"{header}\n{row}\n".encode())
