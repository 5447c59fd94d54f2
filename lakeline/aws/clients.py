"""boto3 clients, made in one place with one retry configuration.

Every client retries throttling and transient errors the same way, with botocore's ``standard`` retry
mode (exponential backoff with jitter, retry quotas) and more attempts than its default three: a
burst of arrivals throttles DynamoDB, SQS and Step Functions before it fails anything. What botocore
cannot retry (an UnprocessedItems answer, a refused batch entry) is retried with ``lakeline.aws.retry``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_athena import AthenaClient
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient
    from mypy_boto3_glue import GlueClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_stepfunctions import SFNClient

MAX_ATTEMPTS = 5  # the first call and four retries (botocore's standard mode caps each wait at 20 s)
RETRY_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS})
S3_CONNECTIONS = 32  # a carry's parallel copies: 8 files x 4 parts (lakeline.storage.COPY_TRANSFER)


def client(
    service: str,
    *,
    region: str | None = None,
    endpoint_url: str | None = None,
    credentials: Mapping[str, str] | None = None,
    max_pool_connections: int | None = None,
    read_timeout: float | None = None,
) -> Any:
    """A boto3 client of ``service`` with the retry configuration (untyped: prefer ``AwsClients``);
    ``credentials`` (``aws_access_key_id``, ``aws_secret_access_key``, ``aws_session_token``) sign its
    requests instead of boto3's own resolution."""
    config = RETRY_CONFIG
    if max_pool_connections:
        config = config.merge(Config(max_pool_connections=max_pool_connections))
    if read_timeout:  # a call answered only when its work is done (a synchronous Lambda invoke)
        config = config.merge(Config(read_timeout=read_timeout))
    return boto3.client(  # type: ignore[call-overload]
        service, region_name=region, endpoint_url=endpoint_url, config=config, **(credentials or {})
    )


@dataclass
class AwsClients:
    """The clients a process uses, each made on first use and then kept (a Lambda keeps them warm).

    ``region`` and ``endpoint_url`` default to boto3's own resolution (the environment, the profile);
    ``endpoint_url`` points every client at one endpoint (a local AWS, as the embedded runtime uses)."""

    region: str | None = None
    endpoint_url: str | None = None

    def _client(self, service: str) -> Any:
        return client(service, region=self.region, endpoint_url=self.endpoint_url)

    @cached_property
    def athena(self) -> AthenaClient:
        return self._client("athena")  # type: ignore[no-any-return]

    @cached_property
    def cloudformation(self) -> Any:  # no type stubs installed for CloudFormation
        return self._client("cloudformation")

    @cached_property
    def dynamodb(self) -> DynamoDBClient:
        return self._client("dynamodb")  # type: ignore[no-any-return]

    @cached_property
    def dynamodbstreams(self) -> DynamoDBStreamsClient:
        return self._client("dynamodbstreams")  # type: ignore[no-any-return]

    @cached_property
    def glue(self) -> GlueClient:
        return self._client("glue")  # type: ignore[no-any-return]

    @cached_property
    def s3(self) -> S3Client:
        # Its pool holds the connections of a carry's parallel copies (lakeline.storage.COPY_TRANSFER).
        return client(  # type: ignore[no-any-return]
            "s3", region=self.region, endpoint_url=self.endpoint_url, max_pool_connections=S3_CONNECTIONS
        )

    @cached_property
    def sqs(self) -> SQSClient:
        return self._client("sqs")  # type: ignore[no-any-return]

    @cached_property
    def stepfunctions(self) -> SFNClient:
        return self._client("stepfunctions")  # type: ignore[no-any-return]
