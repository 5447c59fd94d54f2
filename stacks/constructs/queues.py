"""Encrypted SQS queues with dead-letter queues, and the alarms an operator needs."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.nag import acknowledge

EVENT_RETRIES = 185
"""EventBridge's attempts to deliver an event to a target (its own default, stated): with ``EVENT_MAX_AGE``, a
target that refuses events for a day has them parked in its dead-letter queue, not dropped."""
EVENT_MAX_AGE = Duration.hours(24)


class DeadLetterQueue(Construct):
    """A queue where messages that failed for good are kept 14 days, with an alarm on any arrival."""

    def __init__(self, scope: Construct, construct_id: str, *, key: kms.IKey, alarm_topic: sns.ITopic) -> None:
        super().__init__(scope, construct_id)
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=key,
            enforce_ssl=True,
            retention_period=Duration.days(14),
            # What it holds is parked data: kept when the pipeline stack is torn down or replaced (#40).
            removal_policy=RemovalPolicy.RETAIN,
        )
        acknowledge(self.queue, {"AwsSolutions-SQS3": "This is a dead-letter queue; it has no DLQ of its own."})
        alarm = cloudwatch.Alarm(
            self,
            "Alarm",
            alarm_description="Messages reached a dead-letter queue: read their lakeline_reason attribute.",
            metric=self.queue.metric_approximate_number_of_messages_visible(period=Duration.minutes(5)),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(actions.SnsAction(alarm_topic))


class QueueWithDeadLetters(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        key: kms.IKey,
        alarm_topic: sns.ITopic,
        visibility_timeout: Duration,
        max_receive_count: int = 3,
        oldest_message_alarm: Duration | None = None,
        follow_ups: bool = False,
    ) -> None:
        """``follow_ups``: the queue also has a follow-up queue (``follow_up_queue``), sharing its dead-letter queue."""
        super().__init__(scope, construct_id)
        self.dead_letters = DeadLetterQueue(self, "DeadLetters", key=key, alarm_topic=alarm_topic)
        self.dead_letter_queue = self.dead_letters.queue

        def queue(queue_id: str) -> sqs.Queue:
            made = sqs.Queue(
                self,
                queue_id,
                encryption=sqs.QueueEncryption.KMS,
                encryption_master_key=key,
                enforce_ssl=True,
                visibility_timeout=visibility_timeout,
                retention_period=Duration.days(4),
                dead_letter_queue=sqs.DeadLetterQueue(
                    queue=self.dead_letter_queue, max_receive_count=max_receive_count
                ),
                # Messages not yet consumed are arrivals or runs: kept when the pipeline stack is torn down (#40).
                removal_policy=RemovalPolicy.RETAIN,
            )
            backlog = cloudwatch.Alarm(
                self,
                f"{queue_id}BacklogAlarm" if queue_id != "Queue" else "BacklogAlarm",
                alarm_description="The oldest message has waited too long: consumers are failing or throttled.",
                metric=made.metric_approximate_age_of_oldest_message(period=Duration.minutes(5)),
                threshold=(oldest_message_alarm or Duration.hours(1)).to_seconds(),
                evaluation_periods=3,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            backlog.add_alarm_action(actions.SnsAction(alarm_topic))
            return made

        self.queue = queue("Queue")
        # A stage's follow-up runs (the partition's next run, which its lease and run slot are handed to) wait
        # apart from new arrivals: a follow-up queued behind a burst's backlog held its slot idle for minutes (#39).
        self.follow_up_queue: sqs.Queue | None = queue("FollowUps") if follow_ups else None

    @property
    def follow_ups(self) -> sqs.Queue:
        """The follow-up queue of a stage's queue; an error for a queue made without one."""
        if self.follow_up_queue is None:
            raise ValueError(f"{self.node.path} has no follow-up queue")
        return self.follow_up_queue
