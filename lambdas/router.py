"""What both stages' routers are made of (their handlers differ in what a queue message is and how a
run is planned): the environment, the settings it describes, the Glue catalog, the partition commits
and the Step Functions and SQS clients."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from lakeline.aws.clients import AwsClients
from lakeline.commits import PartitionCommits
from lakeline.engines.athena import AthenaEngine
from lakeline.lambda_support import RouterEnvironment
from lakeline.settings import PipelineSettings

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_stepfunctions import SFNClient

EnvironmentT = TypeVar("EnvironmentT", bound=RouterEnvironment)


@dataclass(frozen=True)
class RouterRuntime(Generic[EnvironmentT]):
    environment: EnvironmentT
    aws: AwsClients
    settings: PipelineSettings
    catalog: AthenaEngine
    commits: PartitionCommits
    sfn: SFNClient
    sqs: SQSClient


def router_runtime(environment: EnvironmentT) -> RouterRuntime[EnvironmentT]:
    aws = AwsClients()
    return RouterRuntime(
        environment,
        aws,
        environment.pipeline_settings(),
        AthenaEngine(aws.athena, glue=aws.glue),
        PartitionCommits(aws.dynamodb, environment.pipeline_state_table),
        aws.stepfunctions,
        aws.sqs,
    )
