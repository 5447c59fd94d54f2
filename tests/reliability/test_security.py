"""Security of what is deployed and of how SQL is built.

- cdk-nag's AwsSolutions checks pass for both engines (in-process ``app.synth()`` raises on any finding
  not acknowledged with a reason), and they do fail on a violation.
- Every bucket blocks public access, refuses plain HTTP and is encrypted; so is every queue and topic.
- Every IAM statement on ``Resource: "*"`` grants only actions of services without resource-level
  permissions, each written down here with its reason.
- SQL is only assembled from checked names and quoted literals (``tests/reliability/sql_scan.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sqs as sqs
from cdk_nag import AwsSolutionsChecks

from harness.faults import resources_of, synthesized_templates
from tests.reliability.sql_scan import SCANNED_BUILDERS, TRUSTED, defined_functions, scan, scan_source

ROOT = Path(__file__).resolve().parents[2]
ENGINES = ("athena", "spark")
SQL_SCOPE = ["stage_a", "stage_b", "lakeline/partitions.py"]

# Actions granted on "*", and why: these services (or these actions) have no resource-level permissions.
WILDCARD_ACTIONS: dict[str, str] = {
    **dict.fromkeys(
        ["xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules", "xray:GetSamplingTargets"],
        "X-Ray tracing of the functions and state machines: X-Ray has no resource-level permissions.",
    ),
    **dict.fromkeys(
        [
            "logs:CreateLogDelivery",
            "logs:GetLogDelivery",
            "logs:UpdateLogDelivery",
            "logs:DeleteLogDelivery",
            "logs:ListLogDeliveries",
            "logs:PutResourcePolicy",
            "logs:DescribeResourcePolicies",
            "logs:DescribeLogGroups",
        ],
        "Step Functions logging is a CloudWatch Logs vended delivery, whose APIs take no resource.",
    ),
    "dynamodb:ListStreams": "Finding a table's stream (stream event sources): ListStreams takes no resource.",
    "lakeformation:GetDataAccess": "Athena's credential vending through Lake Formation takes no resource.",
}


def templates() -> list[tuple[str, dict[str, Any]]]:
    return [(engine, template) for engine in ENGINES for template in synthesized_templates(engine)]


def wildcard_statements() -> list[tuple[str, str, list[str]]]:
    """(engine, policy logical id, actions) of every Allow statement whose resources include "*"."""
    found = []
    for engine, template in templates():
        for name, resource in template["Resources"].items():
            documents = []
            if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
                documents = [resource["Properties"]["PolicyDocument"]]
            elif resource["Type"] == "AWS::IAM::Role":
                documents = [p["PolicyDocument"] for p in resource["Properties"].get("Policies", [])]
            for document in documents:
                for statement in document["Statement"]:
                    resources = statement.get("Resource", [])
                    resources = resources if isinstance(resources, list) else [resources]
                    actions = statement.get("Action", [])
                    if statement["Effect"] == "Allow" and "*" in resources:
                        found.append((engine, name, actions if isinstance(actions, list) else [actions]))
    return found


# -- cdk-nag ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_cdk_nag_finds_nothing_unacknowledged(engine: str) -> None:
    storage, pipeline = synthesized_templates(engine)  # app.synth() raises on an unacknowledged finding
    assert storage["Resources"] and pipeline["Resources"]


def test_cdk_nag_fails_the_synth_on_a_violation(tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Canary")
    sqs.Queue(stack, "PlainQueue")  # no DLQ, no TLS enforcement: AwsSolutions-SQS3 and SQS4
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(RuntimeError, match="AwsSolutions-SQS4"):
        app.synth()


# -- storage, queues and topics -----------------------------------------------------------------------------


def denies_plain_http(document: dict[str, Any]) -> bool:
    return any(
        s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
        for s in document["Statement"]
    )


def test_every_bucket_blocks_public_access_refuses_plain_http_and_is_encrypted() -> None:
    checked = 0
    for _, template in templates():
        policies = {
            json.dumps(p["Properties"]["Bucket"]): p["Properties"]["PolicyDocument"]
            for p in resources_of(template, "AWS::S3::BucketPolicy").values()
        }
        for name, bucket in resources_of(template, "AWS::S3::Bucket").items():
            properties = bucket["Properties"]
            assert properties["PublicAccessBlockConfiguration"] == {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            }, name
            assert properties["BucketEncryption"]["ServerSideEncryptionConfiguration"], name
            assert denies_plain_http(policies[json.dumps({"Ref": name})]), name
            checked += 1
    assert checked >= 2 * 7


def test_every_queue_and_topic_is_encrypted_and_refuses_plain_http() -> None:
    for _, template in templates():
        queue_policies = [p["Properties"] for p in resources_of(template, "AWS::SQS::QueuePolicy").values()]
        for name, queue in resources_of(template, "AWS::SQS::Queue").items():
            assert "KmsMasterKeyId" in queue["Properties"], name
            covering = [p for p in queue_policies if {"Ref": name} in p["Queues"]]
            assert any(denies_plain_http(p["PolicyDocument"]) for p in covering), name
        topic_policies = [p["Properties"] for p in resources_of(template, "AWS::SNS::TopicPolicy").values()]
        for name, topic in resources_of(template, "AWS::SNS::Topic").items():
            assert "KmsMasterKeyId" in topic["Properties"], name
            covering = [p for p in topic_policies if {"Ref": name} in p["Topics"]]
            assert any(denies_plain_http(p["PolicyDocument"]) for p in covering), name
        for name, table in resources_of(template, "AWS::DynamoDB::Table").items():
            assert table["Properties"]["SSESpecification"]["SSEEnabled"] is True, name


# -- IAM ---------------------------------------------------------------------------------------------------------


def test_every_wildcard_resource_grants_only_actions_without_resource_level_permissions() -> None:
    statements = wildcard_statements()
    assert statements, "the stacks trace with X-Ray: there are wildcard statements to check"
    unexplained = sorted(
        (engine, policy, action)
        for engine, policy, actions in statements
        for action in actions
        if action not in WILDCARD_ACTIONS
    )
    # CDK's Athena task grants S3 reads on "*"; stacks/constructs/grants.py confines them to the pipeline's buckets.
    assert unexplained == []


def test_no_s3_action_on_every_resource() -> None:
    granted = {action for _, _, actions in wildcard_statements() for action in actions if action.startswith("s3:")}
    assert granted == set()


def test_no_statement_allows_every_action() -> None:
    for _, template in templates():
        for policy in resources_of(template, "AWS::IAM::Policy").values():
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                assert not any(action == "*" or action.endswith(":*") for action in actions), statement


# -- SQL ---------------------------------------------------------------------------------------------------------


def test_sql_is_only_assembled_from_checked_names_and_literals() -> None:
    findings = scan(ROOT, SQL_SCOPE)
    assert findings == [], "\n".join(map(str, findings))
    functions = defined_functions(ROOT, SQL_SCOPE)
    assert functions >= SCANNED_BUILDERS, "an allowance names a function that no longer exists"
    assert functions >= {function for function, _ in TRUSTED}, "a trusted expression's function is gone"


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("def f(table):\n    return f'SELECT * FROM {table}'\n", ["table"]),
        ("def f(key):\n    where = key.split('/')[3]\n    return f'DELETE x WHERE {where}'\n", ["where"]),
        ("def f(v):\n    return f\"ALTER TABLE t ADD PARTITION (d='{v}')\"\n", ["v"]),
        ("def f(db, t):\n    return f'DROP TABLE IF EXISTS `{db}`.`{t}`'\n", ["db", "t"]),
        ("def f(table):\n    return f'SELECT * FROM {dml_name(table)}'\n", []),
        ("def f(v):\n    spec = string_literal(v)\n    return f'ALTER TABLE t PARTITION (d={spec})'\n", []),
        ("def f(cs):\n    return f\"SELECT {', '.join(dml_name(c) for c in cs)} FROM t\"\n", []),
        ("def f(cs):\n    return f\"SELECT {', '.join(cs)} FROM t\"\n", ["', '.join(cs)"]),
        ("def f(t):\n    raise ValueError(f'table {t} not FROM here')\n", []),
        ("def f(v):\n    d, t = check_qualified_table(v)\n    return f'SELECT * FROM {d}.{t}'\n", []),
    ],
)
def test_the_sql_scan_tells_checked_from_unchecked_interpolations(source: str, found: list[str]) -> None:
    assert [finding.expression for finding in scan_source("example.py", source)] == found
