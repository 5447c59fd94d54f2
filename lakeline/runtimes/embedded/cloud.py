"""A local AWS endpoint for the embedded runtime: moto's server on 127.0.0.1 serving the pipeline's
DynamoDB tables (with streams), SQS queues and the lineage archive bucket.

Starting it points this process's AWS SDK at it (``AWS_ENDPOINT_URL`` and test credentials), and sets
the environment variables the Lambda handlers read, so the handlers run unchanged against it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakeline.aws.clients import AwsClients
from lakeline.dependencies.tables import DependencyTableNames, create_dependency_tables
from lakeline.lineage.records.archive import ARCHIVE_PREFIX
from lakeline.lineage.records.table import LINEAGE_TABLE
from lakeline.names import METRICS_NAMESPACE
from lakeline.project.workspace import WorkspaceDamaged, write_json
from lakeline.runtimes.embedded.handler_caches import reset_handler_caches

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

REGION = "us-east-1"
QUEUES = ("queue-a", "queue-b", "lineage", "trace")
STAGE_QUEUES = ("queue-a", "queue-b")  # each with a follow-up queue, "<name>-follow-ups"
STREAM_FAILURES = "dependencies-stream-dlq"
MAX_RECEIVE_COUNT = 3  # receives before SQS moves a message to its DLQ, as the deployed queues do
ARCHIVE_BUCKET = "lakeline-lineage-archive"
LINEAGE_TABLE_NAME = "lineage"


def lineage_records_file(pipeline_state_file: Path) -> Path:
    """Where the lineage table is kept between runs: beside the pipeline-state table."""
    return pipeline_state_file.with_name("lineage-records.json")


LEASE_ATTRIBUTES = frozenset({"lease_owner", "lease_expires", "lease_location", "lease_seq", "lease_previous"})


@dataclass
class LocalCloud:
    server: Any
    endpoint: str
    queue_urls: dict[str, str]
    dependencies_stream_arn: str
    lineage_stream_arn: str
    names: DependencyTableNames = field(default_factory=DependencyTableNames)
    _saved_environment: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def start(cls) -> LocalCloud:
        aws = AwsClients()
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        saved = {name: os.environ.get(name) for name in _sdk_environment(endpoint)}
        os.environ.update(_sdk_environment(endpoint))
        dynamodb = aws.dynamodb
        names = DependencyTableNames()
        dependencies_stream = create_dependency_tables(dynamodb, names)
        created = dynamodb.create_table(**LINEAGE_TABLE.create_table_kwargs(LINEAGE_TABLE_NAME))
        dynamodb.update_time_to_live(**LINEAGE_TABLE.time_to_live_kwargs(LINEAGE_TABLE_NAME))
        sqs = aws.sqs
        queue_urls = {}
        for name in QUEUES:
            dead_letters = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
            dead_letters_arn = sqs.get_queue_attributes(QueueUrl=dead_letters, AttributeNames=["QueueArn"])
            redrive = json.dumps(
                {
                    "deadLetterTargetArn": dead_letters_arn["Attributes"]["QueueArn"],
                    "maxReceiveCount": str(MAX_RECEIVE_COUNT),
                }
            )
            queue_urls[name] = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": redrive})["QueueUrl"]
            queue_urls[f"{name}-dlq"] = dead_letters
            if name in STAGE_QUEUES:  # as deployed: the stage's follow-up runs wait apart, sharing its DLQ
                follow_ups = f"{name}-follow-ups"
                queue_urls[follow_ups] = sqs.create_queue(QueueName=follow_ups, Attributes={"RedrivePolicy": redrive})[
                    "QueueUrl"
                ]
        # The stream's failure queue, as deployed: a dependency item the stream function refuses is parked there.
        queue_urls[STREAM_FAILURES] = sqs.create_queue(QueueName=STREAM_FAILURES)["QueueUrl"]
        aws.s3.create_bucket(Bucket=ARCHIVE_BUCKET)
        cloud = cls(
            server=server,
            endpoint=endpoint,
            queue_urls=queue_urls,
            dependencies_stream_arn=dependencies_stream,
            lineage_stream_arn=created["TableDescription"].get("LatestStreamArn", ""),
            names=names,
            _saved_environment=saved,
        )
        lambda_environment = cloud.lambda_environment()
        cloud._saved_environment.update({name: os.environ.get(name) for name in lambda_environment})
        os.environ.update(lambda_environment)
        reset_handler_caches()  # built against another endpoint, if this process ran one before
        return cloud

    def lambda_environment(self) -> dict[str, str]:
        """What the CDK stacks set on the functions, pointing at the local resources."""
        return {
            "DEPENDENCIES_TABLE": self.names.dependencies,
            "DEPENDENCIES_BY_TABLE_TABLE": self.names.by_table,
            "DEPENDENCIES_STREAM_DEAD_LETTER_QUEUE_URL": self.queue_urls[STREAM_FAILURES],
            "PIPELINE_STATE_TABLE": self.names.pipeline_state,
            "STAGE_A_QUEUE_URL": self.queue_urls["queue-a"],
            "STAGE_A_FOLLOW_UP_QUEUE_URL": self.queue_urls["queue-a-follow-ups"],
            "STAGE_B_FOLLOW_UP_QUEUE_URL": self.queue_urls["queue-b-follow-ups"],
            # One run at a time here, and the loop ends when no message is visible: a follow-up starts at once.
            "FOLLOW_UP_WINDOW_SECONDS": "0",
            "STAGE_A_DEAD_LETTER_QUEUE_URL": self.queue_urls["queue-a-dlq"],
            "STAGE_B_QUEUE_URL": self.queue_urls["queue-b"],
            # Targets a finished partition cannot be routed to are parked there too, with the reason.
            "STAGE_B_DEAD_LETTER_QUEUE_URL": self.queue_urls["queue-b-dlq"],
            # The stage B failure function parks a failed run's message in queue B's DLQ.
            "DEAD_LETTER_QUEUE_URL": self.queue_urls["queue-b-dlq"],
            "LINEAGE_QUEUE_URL": self.queue_urls["lineage"],
            "LINEAGE_DEAD_LETTER_QUEUE_URL": self.queue_urls["lineage-dlq"],
            "LINEAGE_TABLE_NAME": LINEAGE_TABLE_NAME,
            "TRACE_QUEUE_URL": self.queue_urls["trace"],
            "ARCHIVE_BUCKET": ARCHIVE_BUCKET,
            "ARCHIVE_PREFIX": ARCHIVE_PREFIX,
            # The demo traces right away: nothing needs to settle first.
            "TRACE_SETTLE_SECONDS": "0",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            "POWERTOOLS_LOG_LEVEL": "WARNING",
        }

    def save_pipeline_state(self, path: Path) -> int:
        """Keep the pipeline-state table (partition versions, leases, what was applied, trigger mode
        ``all``'s arrivals) in the workspace, so the next run starts where this one ended; and the lineage
        table beside it (``lineage_records_file``), as a deployment keeps it."""
        self._save_table(LINEAGE_TABLE_NAME, lineage_records_file(path))
        return self._save_table(self.names.pipeline_state, path)

    def _save_table(self, table: str, path: Path) -> int:
        items = []
        for page in self.dynamodb.get_paginator("scan").paginate(TableName=table):
            items.extend(page.get("Items", []))
        write_json(path, sorted(items, key=lambda item: json.dumps(item, sort_keys=True)))
        return len(items)

    def restore_pipeline_state(self, path: Path, items: list[dict[str, Any]]) -> int:
        """Load what ``save_pipeline_state`` kept at ``path``: its ``items`` (``Workspace.read_pipeline_state``,
        checked) and the lineage table beside it. A local runtime that starts has no run in flight, so the
        leases of an earlier run that was stopped (Ctrl-C, a crash) are dropped: the arrivals they held wait
        in ``pending`` for the next arrival of their partition, instead of for hours."""
        # A later run records under the trees of earlier runs (a late file's targets under the other
        # sources' arrivals, the routing of a version published before): without their nodes its trace
        # archived those trees cut short, over the whole ones (#36).
        records = lineage_records_file(path)
        try:
            kept_records = json.loads(records.read_text()) if records.exists() else []
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise WorkspaceDamaged(
                f"the lineage records {records} cannot be read ({error}); restore the file from a copy, or delete "
                "it: the lineage of earlier runs is then in the archive only"
            ) from None
        now = time.time()
        for item in kept_records:
            if float(item.get("ttl_expiry", {}).get("N", now)) >= now:  # DynamoDB's TTL would have removed it
                self.dynamodb.put_item(TableName=LINEAGE_TABLE_NAME, Item=item)
        for item in items:
            kept = {name: value for name, value in item.items() if name not in LEASE_ATTRIBUTES}
            self.dynamodb.put_item(TableName=self.names.pipeline_state, Item=kept)
        return len(items)

    @property
    def dynamodb(self) -> DynamoDBClient:
        return AwsClients().dynamodb

    @property
    def streams(self) -> DynamoDBStreamsClient:
        return AwsClients().dynamodbstreams

    @property
    def sqs(self) -> SQSClient:
        return AwsClients().sqs

    @property
    def s3(self) -> S3Client:
        return AwsClients().s3

    def stop(self) -> None:
        """Stop the endpoint, leaving none of this cloud's tables, queues and bucket in the process's moto
        backends, which every endpoint of the process shares: the next ``start`` makes the same names."""
        try:
            self._remove_resources()
        finally:
            self.server.stop()
        for name, value in self._saved_environment.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        reset_handler_caches()

    def _remove_resources(self) -> None:
        from botocore.exceptions import ClientError

        aws = AwsClients()
        tables = [self.names.dependencies, self.names.by_table, self.names.pipeline_state, LINEAGE_TABLE_NAME]
        for table in tables:
            with suppress(ClientError):
                aws.dynamodb.delete_table(TableName=table)
        for url in self.queue_urls.values():
            with suppress(ClientError):
                aws.sqs.delete_queue(QueueUrl=url)
        with suppress(ClientError):
            for page in aws.s3.get_paginator("list_objects_v2").paginate(Bucket=ARCHIVE_BUCKET):
                for entry in page.get("Contents", []):
                    aws.s3.delete_object(Bucket=ARCHIVE_BUCKET, Key=entry["Key"])
            aws.s3.delete_bucket(Bucket=ARCHIVE_BUCKET)


def _sdk_environment(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "lakeline-local",
        "AWS_SECRET_ACCESS_KEY": "lakeline-local",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    }
