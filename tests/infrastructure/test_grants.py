"""Every AWS call a deployed function's code makes is granted to that function's synthesized role.

The handler tier runs each function's code on moto, which enforces no IAM; ``harness.aws_calls`` records
what it called, by function. Here each call's IAM actions (``harness.aws_calls.iam_actions``) must be
allowed by an ``Allow`` statement of the role's policies in the synthesized template, for both engines.
A grant the code needs and the stack lacks (a router describing an execution it only may start) fails
here, not with AccessDenied in AWS.

The limit, said plainly: actions are matched, resources are not (a grant on the wrong table passes).
``make test`` runs the handler tier before this one; run alone, this test has nothing to check and skips.
"""

from __future__ import annotations

import fnmatch
from collections import defaultdict
from typing import Any

import pytest
from aws_cdk.assertions import Template

from harness.aws_calls import RECORDER, ApiCall
from tests.infrastructure.test_stacks import as_list, resources, role_statements, synthesized

# What AWSLambdaBasicExecutionRole, which every function has, allows.
BASIC_EXECUTION = ("logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents")


@pytest.fixture(scope="module", params=["athena", "spark"])
def pipeline(request: pytest.FixtureRequest) -> Template:
    return synthesized(request.param)[1]


def allowed_actions(pipeline: Template, function: dict[str, Any]) -> list[str]:
    actions = [
        action
        for statement in role_statements(pipeline, function)
        if statement.get("Effect", "Allow") == "Allow"
        for action in as_list(statement["Action"])
    ]
    return [*actions, *BASIC_EXECUTION]


def allows(patterns: list[str], action: str) -> bool:
    """IAM matches actions case-insensitively, with ``*`` and ``?`` wildcards."""
    return any(fnmatch.fnmatchcase(action.lower(), pattern.lower()) for pattern in patterns)


def test_the_action_matcher_can_refuse() -> None:
    assert allows(["states:StartExecution"], "states:startexecution")
    assert allows(["s3:GetObject*"], "s3:GetObjectVersion")
    assert not allows(["states:StartExecution"], "states:DescribeExecution")
    assert ApiCall("stage_b_router", "states", "DescribeExecution").actions == ("states:DescribeExecution",)
    assert ApiCall("x", "s3", "ListObjectsV2").actions == ("s3:ListBucket",)
    assert ApiCall("x", "s3", "PutObject").actions == ("s3:PutObject", "kms:GenerateDataKey")


def functions_of(pipeline: Template) -> dict[str, list[dict[str, Any]]]:
    """Every function of each handler package (``partition_commit`` is deployed once per stage)."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for function in resources(pipeline, "AWS::Lambda::Function").values():
        handler = function["Properties"]["Handler"]
        if handler.startswith("lambdas."):
            found[handler.split(".")[1]].append(function["Properties"])
    return found


def test_every_call_a_function_makes_is_granted_to_its_role(pipeline: Template) -> None:
    if not RECORDER.handler_tests_ran:
        pytest.skip("no handler test ran in this session: run tests/handlers first (make test does)")
    calls: dict[str, set[ApiCall]] = defaultdict(set)
    for call in RECORDER.calls:
        calls[call.function].add(call)
    functions = functions_of(pipeline)
    # A function one engine deploys and the other does not (the quality function is Athena's: the Spark engine's
    # quality step is a Glue job run) is checked against the template that has it.
    anywhere = {name for engine in ("athena", "spark") for name in functions_of(synthesized(engine)[1])}
    assert set(calls) <= anywhere, f"calls from code no function runs: {sorted(set(calls) - anywhere)}"
    assert set(functions) <= set(calls), f"handlers the tier never ran: {sorted(set(functions) - set(calls))}"
    missing = sorted(
        f"{function}: {action} (for {call.operation})"
        for function, made in calls.items()
        for deployed in functions.get(function, [])
        for call in made
        for action in call.actions
        if not allows(allowed_actions(pipeline, deployed), action)
    )
    assert missing == [], "calls the code makes that the function's role is not granted:\n" + "\n".join(missing)
    assert len(functions["partition_commit"]) == 2 and resources(pipeline, "AWS::IAM::Role")
