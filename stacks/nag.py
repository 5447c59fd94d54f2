"""Acknowledging cdk-nag findings, each with the reason it is acceptable.

cdk-nag 3 uses CDK's own ``Validations.of(construct).acknowledge(...)``: an acknowledgment applies to
the construct and everything below it, and each finding is acknowledged by its full id
(``AwsSolutions-IAM5[Resource::...]``), so nothing is waved through by rule alone.

IAM wildcard findings (IAM5) are many and follow from ``grant_*`` helpers (``s3:GetObject*`` on
``<bucket>/*``, ``kms:ReEncrypt*``, ``<function>:*`` versions). ``AcknowledgeGrantWildcards`` computes
each policy's findings exactly as cdk-nag names them and acknowledges those that match a written
reason in ``GRANT_WILDCARD_REASONS``; any other wildcard stays a finding and fails the synth until
someone writes down why it is acceptable.
"""

from __future__ import annotations

import json
import re
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from constructs import IConstruct

# (finding pattern, reason). Patterns match the finding after "AwsSolutions-IAM5[...]".
GRANT_WILDCARD_REASONS: list[tuple[str, str]] = [
    (
        r"Action::s3:(GetObject|GetBucket|List|DeleteObject|Abort|PutObject|PutObjectLegalHold|PutObjectRetention"
        r"|PutObjectTagging|PutObjectVersionTagging)\*",
        "s3 action families from Bucket.grant_* on Lakeline's own buckets: reads, writes and deletes of "
        "stage data and results need the object-level variants (versions, tags, multipart aborts).",
    ),
    (
        r"Action::kms:(ReEncrypt|GenerateDataKey)\*",
        "kms action families from grant_* on Lakeline's own data key, needed for SSE-KMS objects and items.",
    ),
    (
        r"Resource::Lakeline-[a-z0-9_]+-Storage-[A-Za-z]+BucketArn/\*",
        "Objects of a Lakeline bucket: stages address objects by key prefixes known only per arrival.",
    ),
    (
        r"Resource::Lakeline-[a-z0-9_]+-Storage-LineageArchiveBucketArn/archive/\*",
        "The lineage archive's objects: the compaction reads and deletes the staged traces of any root and day "
        "(archive/_staged/dt=<day>/...) and rewrites any day's objects (archive/dt=<day>/part-<n>.jsonl).",
    ),
    (
        r"Resource::Lakeline-[a-z0-9_]+-Storage-RawBucketArn/\*\.lakeline-by-name\.\*",
        "Copies of arriving CSV and JSON files in their table's column order and key spelling, which the "
        "stage A router writes next to a file whose header orders the columns otherwise or whose JSON keys "
        "are spelled in another case (any partition folder; .csv, .json, .jsonl, optionally .gz).",
    ),
    (
        r"Resource::Lakeline-[a-z0-9_]+-Storage-StageBucketArn/\*/lakeline_run=\*/\?{16}/manifest",
        "Manifests of the raw files a stage A compaction or rewrite reads, which the stage A router writes "
        "beside the run's prefix (any partition, any run: <run prefix>/<16-character digest>/manifest).",
    ),
    (
        r"Resource::Lakeline-[a-z0-9_]+-Storage-StageBucketArn/\*/lakeline_run=\*/batch/\?{16}",
        "The batch a stage A run takes (the waiting arrivals' entries and ids), which the stage A router writes "
        "beside the run's prefix when it plans the run (any partition, any run: <run prefix>/batch/<16-character "
        "digest>), so that the run's state machine input names it instead of listing it.",
    ),
    (
        r"Resource::Lakeline-[a-z0-9_]+-Storage-(Stage|Analytics)BucketArn/\*/lakeline_run=\*/applied/\?{16}",
        "Lists of what each partition's published version holds, beside the version (any partition, any run: "
        "<run prefix>/applied/<16-character digest>), which a stage's router reads to plan the next run.",
    ),
    (
        r"Resource::Lakeline-[a-z0-9_]+-Storage-LineageArchiveBucketArn/openlineage/\*",
        "OpenLineage events written by the stage functions, one object per event under the archive's "
        "openlineage/ folder (keys named by the event's date and run id).",
    ),
    (
        r"Resource::Lakeline-[a-z0-9_]+-Storage-[A-Za-z]+TableArn/(index|stream)/\*",
        "Indexes or streams of a Lakeline table, granted by Table.grant_*.",
    ),
    (
        r"Resource::arn:<AWS::Partition>:s3:::Lakeline-[a-z0-9_]+-Storage-AthenaResultsBucketName/athena/\*",
        "Objects under the workgroup's enforced result prefix, where Athena writes each query's results.",
    ),
    (
        r"Resource::<[A-Za-z0-9]+\.Arn>:\*",
        "All versions of a Lakeline Lambda function invoked by a state machine (LambdaInvoke grant).",
    ),
    (
        r"Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:"
        r"\{\"Fn::Select\":\[6,\{\"Fn::Split\":\[\":\",\{\"Ref\":\"Stage[AB]StateMachine[0-9A-F]+\"\}\]\}\]\}:\*",
        "Executions of the stage's own state machine (StateMachine.grant_execution): a router describes the "
        "execution a redelivered message already started, named per run, to see whether it ended.",
    ),
    (
        r"Resource::arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:(database/\*_[a-z0-9_]+"
        r"|table/\*_[a-z0-9_]+/\*)",
        "Catalog databases and tables of this environment (<team>_<dataset>[_raw]_<env>): teams and "
        "datasets are data, added without redeploying.",
    ),
    (
        r"Resource::arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:table/\*_[a-z0-9_]+/lakeline_tmp_\*",
        "Runs' temp tables (lakeline_tmp_<table>_<run token>[_quality]) in this environment's databases, which a "
        "failure function drops after a killed quality step: named per run, in databases that are data.",
    ),
    (
        r"Resource::arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:(table|userDefinedFunction)/default/\*",
        "Generated by the athena:startQueryExecution.sync task for Athena's 'default' database, against which "
        "Athena resolves unqualified names; Lakeline statements name their databases.",
    ),
    (
        r"Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws-glue/\*",
        "The Glue job's log groups, which Glue creates per job run under /aws-glue/ and encrypts with the "
        "data key (logs:AssociateKmsKey, required by a security configuration with CloudWatch encryption).",
    ),
    (
        r"Resource::arn:<AWS::Partition>:s3:::cdk-[a-z0-9]+-assets-<AWS::AccountId>-<AWS::Region>/\*",
        "Reading CDK file assets (the Glue job's script and Lakeline's library zip) from the bootstrap bucket, "
        "granted by Asset.grant_read.",
    ),
    (
        r"Resource::\*",
        "Services without resource-level permissions: X-Ray segments, CloudWatch Logs delivery of Step "
        "Functions, Athena/Glue job status polling of .sync integrations, Lake Formation data access. (The S3 "
        "reads CDK's Athena .sync task grants on '*' are narrowed to Lakeline's buckets: ConfineAthenaTaskGrants.)",
    ),
]


def acknowledge(scope: IConstruct, findings: dict[str, str]) -> None:
    """``findings`` maps a rule or finding id (``AwsSolutions-IAM4[...]``) to why it is acceptable here.

    Each is recorded under the plain id (which cdk-nag checks) and the plugin-qualified id
    ``AwsSolutions::...`` (which CDK's validation report names).
    """
    acknowledgments = []
    for finding, reason in findings.items():
        plain = finding.removeprefix("AwsSolutions::")
        acknowledgments.append(cdk.Acknowledgment(id=plain, reason=reason))
        acknowledgments.append(cdk.Acknowledgment(id=f"AwsSolutions::{plain}", reason=reason))
    cdk.Validations.of(scope).acknowledge(*acknowledgments)


def flatten_reference(node: Any) -> str:
    """cdk-nag's ``flattenCfnReference``: how a resource appears in a finding id."""
    if node is None:
        return ""
    if isinstance(node, str):
        return node.replace("${", "<").replace("}", ">")
    if isinstance(node, dict):
        if "Fn::Join" in node:
            delimiter, items = node["Fn::Join"]
            return str(delimiter).join(flatten_reference(item) for item in items)
        if "Fn::Sub" in node:
            return flatten_reference(node["Fn::Sub"])
        if "Fn::GetAtt" in node:
            resource, attribute = node["Fn::GetAtt"]
            return f"<{flatten_reference(resource)}.{flatten_reference(attribute)}>"
        if "Fn::ImportValue" in node:
            return flatten_reference(node["Fn::ImportValue"])
        if "Ref" in node:
            return f"<{flatten_reference(node['Ref'])}>"
    return json.dumps(node, separators=(",", ":"))


def wildcard_findings(document: dict[str, Any]) -> list[str]:
    """IAM5 findings of a resolved policy document, named as cdk-nag names them."""
    findings: list[str] = []
    for statement in document.get("Statement", []):
        if statement.get("Effect") != "Allow":
            continue
        actions = statement.get("Action", [])
        for action in actions if isinstance(actions, list) else [actions]:
            if "*" in action and f"Action::{action}" not in findings:
                findings.append(f"Action::{action}")
        resources = statement.get("Resource", [])
        for resource in resources if isinstance(resources, list) else [resources]:
            flat = flatten_reference(resource)
            if "*" in flat and f"Resource::{flat}" not in findings:
                findings.append(f"Resource::{flat}")
    return findings


@jsii.implements(cdk.IAspect)
class AcknowledgeGrantWildcards:
    """Acknowledge each IAM5 finding that matches a reason in ``GRANT_WILDCARD_REASONS``."""

    def visit(self, node: IConstruct) -> None:
        if not isinstance(node, iam.CfnPolicy):
            return
        document = cdk.Stack.of(node).resolve(node.policy_document)
        acknowledged = {}
        for finding in wildcard_findings(document):
            for pattern, reason in GRANT_WILDCARD_REASONS:
                if re.fullmatch(pattern, finding):
                    acknowledged[f"AwsSolutions-IAM5[{finding}]"] = reason
                    break
        if acknowledged:
            acknowledge(node, acknowledged)
