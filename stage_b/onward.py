"""After a partition is finished (stage A or B), send the stage B messages it triggers to queue B, and park
the targets it could not route in queue B's DLQ with the reason, so that they never hold the others back."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel

from lakeline.aws.sqs import dead_letter
from lakeline.dependencies.arrivals import ArrivalTracker
from lakeline.dependencies.store import DependencyStore
from stage_b.dispatch import send_stage_b_messages
from stage_b.messages import LineageParents
from stage_b.routing import Routing, route_finished_partition

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient


class RoutingEnvironment(BaseModel):
    """What a post-update Lambda needs to route onwards (environment variables)."""

    dependencies_table: str
    dependencies_by_table_table: str
    pipeline_state_table: str
    stage_b_queue_url: str
    stage_b_dead_letter_queue_url: str
    lineage_queue_url: str


@dataclass
class OnwardRouting:
    dependencies: DependencyStore
    arrivals: ArrivalTracker
    sqs: SQSClient
    queue_url: str
    dead_letter_queue_url: str

    @classmethod
    def from_environment(
        cls, environment: RoutingEnvironment, dynamodb: DynamoDBClient, sqs: SQSClient
    ) -> OnwardRouting:
        return cls(
            DependencyStore(dynamodb, environment.dependencies_table, environment.dependencies_by_table_table),
            ArrivalTracker(dynamodb, environment.pipeline_state_table),
            sqs,
            environment.stage_b_queue_url,
            environment.stage_b_dead_letter_queue_url,
        )

    def route(
        self,
        table: str,
        partition: Mapping[str, str],
        *,
        run: str,
        path: Sequence[str] = (),
        lineage: LineageParents | None = None,
        version: str | None = None,
    ) -> Routing:
        routing = route_finished_partition(
            table, partition, self.dependencies, self.arrivals, lineage=lineage, path=path, run=run, version=version
        )
        send_stage_b_messages(self.sqs, self.queue_url, routing.messages)
        for unrouted in routing.unrouted:
            body = json.dumps(unrouted.to_dict(), sort_keys=True)
            dead_letter(self.sqs, self.dead_letter_queue_url, body, unrouted.describe(), "routing")
        return routing
