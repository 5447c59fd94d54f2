"""Nothing EventBridge delivers is dropped, nothing parked goes with the stack, nothing logged is kept in clear or
for ever (#40): every rule's target has a dead-letter queue and a retry policy, every queue (arrivals, parked
messages) is kept when the pipeline stack is torn down or replaced, every log group is encrypted and expires.
Read from both engines' synthesized templates, so a rule, queue or function added without them fails here."""

from __future__ import annotations

import pytest

from tests.infrastructure.test_stacks import resources, synthesized


@pytest.mark.parametrize("engine", ["athena", "spark"])
def test_every_event_target_parks_what_it_cannot_deliver(engine: str) -> None:
    checked = 0
    for template in synthesized(engine):
        for name, rule in resources(template, "AWS::Events::Rule").items():
            for target in rule["Properties"]["Targets"]:
                assert "Arn" in target.get("DeadLetterConfig", {}), f"{name}: target {target['Id']} has no DLQ"
                policy = target.get("RetryPolicy", {})
                # Arrivals and ended executions are retried for a day; a schedule's tick until the next one.
                assert 60 <= policy.get("MaximumEventAgeInSeconds", 0) <= 24 * 3600, (name, policy)
                checked += 1
    assert checked >= 2


@pytest.mark.parametrize("engine", ["athena", "spark"])
def test_every_queue_outlives_the_stack(engine: str) -> None:
    queues = {
        name: queue
        for template in synthesized(engine)
        for name, queue in resources(template, "AWS::SQS::Queue").items()
    }
    assert len(queues) >= 6
    dropped = [name for name, queue in queues.items() if queue.get("DeletionPolicy") != "Retain"]
    assert not dropped, f"deleted with their stack: {dropped}"


@pytest.mark.parametrize("engine", ["athena", "spark"])
def test_every_log_group_is_encrypted_and_expires(engine: str) -> None:
    """The functions and state machines log SQL, keys and partition values (#40)."""
    groups = {
        name: group
        for template in synthesized(engine)
        for name, group in resources(template, "AWS::Logs::LogGroup").items()
    }
    assert len(groups) >= 10
    for name, group in groups.items():
        assert "KmsKeyId" in group["Properties"], f"{name} is not encrypted"
        assert group["Properties"].get("RetentionInDays"), f"{name} is kept for ever"
