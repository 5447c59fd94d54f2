"""How the rehearsal's IAM (``lakeline.runtimes.deployed.local_aws.iam``) decides on a policy's statements where moto's
own evaluation differs from AWS's: ``NotResource`` (moto took any statement without ``Resource`` as applying everywhere,
so a ``Deny`` with ``NotResource`` allowed all), ``NotAction``, and action names in any case."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lakeline.runtimes.deployed.local_aws.iam import permitted

MINE = ["arn:aws:s3:::mine", "arn:aws:s3:::mine/*"]
ALLOW_S3 = {"Effect": "Allow", "Action": "s3:*", "Resource": "*"}


def _policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


@pytest.mark.parametrize(
    ("resource", "allowed"),
    [("arn:aws:s3:::mine/data/a.csv", True), ("arn:aws:s3:::mine", True), ("arn:aws:s3:::theirs/a.csv", False)],
)
def test_a_deny_with_not_resource_refuses_every_resource_it_does_not_list(resource: str, allowed: bool) -> None:
    confined = _policy({"Effect": "Deny", "Action": "s3:*", "NotResource": MINE})
    assert permitted([_policy(ALLOW_S3), confined], "s3:GetObject", resource) is allowed


def test_an_allow_with_not_resource_allows_only_the_resources_it_does_not_list() -> None:
    policy = _policy({"Effect": "Allow", "Action": "s3:GetObject", "NotResource": "arn:aws:s3:::secret/*"})
    assert permitted([policy], "s3:GetObject", "arn:aws:s3:::open/a")
    assert not permitted([policy], "s3:GetObject", "arn:aws:s3:::secret/a")
    assert not permitted([policy], "s3:PutObject", "arn:aws:s3:::open/a")  # nor other actions


def test_a_deny_with_not_action_refuses_every_action_it_does_not_list() -> None:
    read_only = _policy(ALLOW_S3, {"Effect": "Deny", "NotAction": ["s3:Get*", "s3:List*"], "Resource": "*"})
    assert permitted([read_only], "s3:GetObject", "arn:aws:s3:::mine/a")
    assert permitted([read_only], "S3:LISTBUCKET", "arn:aws:s3:::mine")  # action names in any case, as AWS
    assert not permitted([read_only], "s3:PutObject", "arn:aws:s3:::mine/a")


def test_an_allow_with_not_action_and_not_resource_allows_outside_both() -> None:
    policy = _policy({"Effect": "Allow", "NotAction": "s3:Delete*", "NotResource": MINE})
    assert permitted([policy], "s3:PutObject", "arn:aws:s3:::theirs/a")
    assert not permitted([policy], "s3:DeleteObject", "arn:aws:s3:::theirs/a")
    assert not permitted([policy], "s3:PutObject", "arn:aws:s3:::mine/a")


def test_gap_where_the_resource_is_not_named_a_deny_with_not_resource_refuses_its_actions() -> None:
    """moto names no resource for DynamoDB, Glue, Step Functions, Athena or Lambda calls (``*``): a statement
    naming resources is taken as naming every one, so this deny refuses even the table it does not list
    (stricter than AWS; a documented gap)."""
    table = "arn:aws:dynamodb:us-east-1:123456789012:table/mine"
    policy = _policy(
        {"Effect": "Allow", "Action": "dynamodb:*", "Resource": "*"},
        {"Effect": "Deny", "Action": "dynamodb:*", "NotResource": table},
    )
    assert not permitted([policy], "dynamodb:GetItem", "*")
    assert permitted([policy], "dynamodb:GetItem", table)
