"""Lineage: the lineage queue → load into the TTL table; a nightly schedule → trace queue → trace into
the archive bucket's staging folder (``archive/_staged/``); the table's stream → stage what TTL deletes first;
an hourly compaction folds the staged objects into the archive (``archive/dt=YYYY-MM-DD/part-N.jsonl``)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sns as sns
from constructs import Construct

from lakeline.lineage.records.archive import ARCHIVE_PREFIX
from lambdas.environments import (
    LineageCompactEnvironment,
    LineageExpiredEnvironment,
    LineageInputEnvironment,
    LineageLoadEnvironment,
    LineageScheduleEnvironment,
    LineageTraceEnvironment,
)
from stacks.constructs.functions import LakelineFunction
from stacks.constructs.queues import EVENT_MAX_AGE, EVENT_RETRIES, DeadLetterQueue, QueueWithDeadLetters
from stacks.contracts import handler_environment
from stacks.storage_refs import StorageImports


class Lineage(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        storage: StorageImports,
        alarm_topic: sns.ITopic,
        ttl_hours: int,
        trace_schedule: str,
        trace_settle_seconds: int = 120,
        compact_schedule: str = "rate(1 hour)",
    ) -> None:
        super().__init__(scope, construct_id)
        table = storage.table("Lineage")
        archive = storage.bucket("LineageArchive")
        table_name = storage.table_name("Lineage")
        self.queue = QueueWithDeadLetters(
            self, "LineageQueue", key=storage.key, alarm_topic=alarm_topic, visibility_timeout=Duration.minutes(2)
        )
        self.input = LakelineFunction(
            self,
            "Input",
            handler_package="lineage_input",
            description="Lineage requests (single or batched) → standard records → the lineage queue",
            environment=handler_environment(
                LineageInputEnvironment, queue_url=self.queue.queue.queue_url, ttl_hours=str(ttl_hours)
            ),
        )
        self.queue.queue.grant_send_messages(self.input.function)

        load = LakelineFunction(
            self,
            "Load",
            handler_package="lineage_load",
            description="Lineage queue → lineage table, batched writes",
            environment=handler_environment(
                LineageLoadEnvironment,
                table_name=table_name,
                dead_letter_queue_url=self.queue.dead_letter_queue.queue_url,
            ),
        )
        table.grant_read_write_data(load.function)  # reads the parents already stored, to refuse conflicts
        self.queue.dead_letter_queue.grant_send_messages(load.function)  # parks what can never be loaded
        load.function.add_event_source(
            sources.SqsEventSource(
                self.queue.queue,
                batch_size=100,
                max_batching_window=Duration.seconds(10),
                report_batch_item_failures=True,
            )
        )

        self.trace_queue = QueueWithDeadLetters(
            self, "TraceQueue", key=storage.key, alarm_topic=alarm_topic, visibility_timeout=Duration.minutes(6)
        )
        schedule = LakelineFunction(
            self,
            "Schedule",
            handler_package="lineage_schedule",
            description="Nightly: queue every root recorded since the last trace (no table scan)",
            environment=handler_environment(
                LineageScheduleEnvironment,
                table_name=table_name,
                trace_queue_url=self.trace_queue.queue.queue_url,
                settle_seconds=str(trace_settle_seconds),
            ),
            timeout=Duration.minutes(5),
        )
        table.grant_read_write_data(schedule.function)
        self.trace_queue.queue.grant_send_messages(schedule.function)
        self._scheduled("Nightly", "Start the nightly lineage trace", trace_schedule, schedule, storage, alarm_topic)

        trace = LakelineFunction(
            self,
            "Trace",
            handler_package="lineage_trace",
            description="Trace queue → rebuild each root's tree → archive JSON Lines",
            environment=handler_environment(
                LineageTraceEnvironment,
                table_name=table_name,
                archive_bucket=archive.bucket_name,
                archive_prefix=ARCHIVE_PREFIX,
            ),
            timeout=Duration.minutes(5),
            memory_size=1024,
        )
        table.grant_read_write_data(trace.function)
        archive.grant_read_write(trace.function)
        trace.function.add_event_source(
            sources.SqsEventSource(self.trace_queue.queue, batch_size=10, report_batch_item_failures=True)
        )

        # The archive is queryable once compacted: within compact_schedule (and the run) of each trace.
        compact = LakelineFunction(
            self,
            "Compact",
            handler_package="lineage_compact",
            description="Hourly: fold the staged lineage traces into the archive's few objects per day",
            environment=handler_environment(
                LineageCompactEnvironment, archive_bucket=archive.bucket_name, archive_prefix=ARCHIVE_PREFIX
            ),
            timeout=Duration.minutes(15),
            memory_size=2048,
        )
        # Reads and deletes the staged objects, rewrites the day objects: all under the archive prefix.
        archive.grant_read_write(compact.function, f"{ARCHIVE_PREFIX}*")
        archive.grant_delete(compact.function, f"{ARCHIVE_PREFIX}*")
        self._scheduled("Hourly", "Compact the lineage archive", compact_schedule, compact, storage, alarm_topic)

        self.expired_failures = DeadLetterQueue(self, "ExpiredFailures", key=storage.key, alarm_topic=alarm_topic)
        expired = LakelineFunction(
            self,
            "Expired",
            handler_package="lineage_expired",
            description="Lineage table stream: archive items TTL deleted before they were traced",
            environment=handler_environment(
                LineageExpiredEnvironment,
                table_name=table_name,
                archive_bucket=archive.bucket_name,
                archive_prefix=ARCHIVE_PREFIX,
            ),
        )
        table.grant_read_data(expired.function)
        table.grant_stream_read(expired.function)
        archive.grant_read_write(expired.function)
        expired.function.add_event_source(
            sources.DynamoEventSource(
                table,
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=100,
                bisect_batch_on_error=True,
                retry_attempts=5,
                report_batch_item_failures=True,
                on_failure=sources.SqsDlq(self.expired_failures.queue),
                # Only deletions by the TTL service reach the function.
                filters=[
                    lambda_.FilterCriteria.filter(
                        {
                            "eventName": lambda_.FilterRule.is_equal("REMOVE"),
                            "userIdentity": {
                                "type": lambda_.FilterRule.is_equal("Service"),
                                "principalId": lambda_.FilterRule.is_equal("dynamodb.amazonaws.com"),
                            },
                        }
                    )
                ],
            )
        )

    def _scheduled(
        self,
        rule_id: str,
        description: str,
        schedule: str,
        function: LakelineFunction,
        storage: StorageImports,
        alarm_topic: sns.ITopic,
    ) -> events.Rule:
        """A rule that starts ``function`` on ``schedule``; a start EventBridge could not deliver is parked with
        an alarm, not dropped (#40)."""
        return events.Rule(
            self,
            rule_id,
            description=description,
            schedule=events.Schedule.expression(schedule),
            targets=[
                targets.LambdaFunction(
                    function.function,
                    retry_attempts=EVENT_RETRIES,
                    max_event_age=EVENT_MAX_AGE,
                    dead_letter_queue=DeadLetterQueue(
                        self, f"{rule_id}DeadLetters", key=storage.key, alarm_topic=alarm_topic
                    ).queue,
                )
            ],
        )
