"""What the Spark engine's first job run needs in AWS and no emulator shows (#20, defects 3 and 4), asserted
on the synthesized templates: CloudWatch Logs may use the data key for the job's encrypted log groups, and
a job run refused for concurrency is retried, not failed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Template

from tests.infrastructure.test_stacks import as_list, resources, state_machine_definition, synthesized


@pytest.fixture(scope="module")
def spark() -> tuple[Template, Template]:
    return synthesized("spark")


def key_statements(storage: Template) -> list[dict[str, Any]]:
    (key,) = resources(storage, "AWS::KMS::Key").values()
    return list(key["Properties"]["KeyPolicy"]["Statement"])


def test_cloudwatch_logs_may_encrypt_the_job_logs_with_the_data_key(spark: tuple[Template, Template]) -> None:
    """The job's security configuration encrypts its CloudWatch logs (SSE-KMS) with the data key; the
    logs service may use a key only if the key policy names it, else the first job run fails."""
    storage, _ = spark
    logs = [
        s for s in key_statements(storage) if "logs." in json.dumps(s.get("Principal", {})) and s["Effect"] == "Allow"
    ]
    assert logs, "no key policy statement for the CloudWatch Logs service principal"
    (statement,) = logs
    assert {"kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"} <= set(as_list(statement["Action"]))
    assert "kms:EncryptionContext:aws:logs:arn" in json.dumps(statement["Condition"])


def test_the_job_role_may_associate_the_key_with_its_log_groups(spark: tuple[Template, Template]) -> None:
    _, pipeline = spark
    (role_id,) = [
        name
        for name, role in resources(pipeline, "AWS::IAM::Role").items()
        if "glue.amazonaws.com" in json.dumps(role["Properties"]["AssumeRolePolicyDocument"])
    ]
    actions = [
        action
        for policy in resources(pipeline, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        for action in as_list(statement["Action"])
    ]
    assert "logs:AssociateKmsKey" in actions


@pytest.mark.parametrize("stage", ["StageA", "StageB"])
def test_a_job_run_refused_for_concurrency_is_retried(spark: tuple[Template, Template], stage: str) -> None:
    """``MaxConcurrentRuns`` is 20 and the routers start more executions than that: Glue answers
    ``ConcurrentRunsExceededException``, which must wait and retry, not fail the run (and park its input).
    Both job runs a stage starts are retried so: the writes and the quality run (#41), which shares the job's
    concurrency."""
    _, pipeline = spark
    states = state_machine_definition(pipeline, stage)["States"]
    prefix = "RunPlan" if stage == "StageA" else "RunSteps"
    jobs = {name: s for name, s in states.items() if s.get("Resource", "").endswith(":glue:startJobRun.sync")}
    assert set(jobs) == {f"{prefix}Spark", f"{prefix}QualitySpark"}
    for job in jobs.values():
        retried = {error for retry in job.get("Retry", []) for error in retry["ErrorEquals"]}
        assert "Glue.ConcurrentRunsExceededException" in retried
        (retry,) = [r for r in job["Retry"] if "Glue.ConcurrentRunsExceededException" in r["ErrorEquals"]]
        assert retry["MaxAttempts"] >= 8 and retry.get("BackoffRate", 1) > 1
