"""The synthesized stacks stood up as CloudFormation creates them, on a local endpoint (#20, first part):
the resources users deploy exist with the names and wiring the templates give them, and an S3 arrival
goes through the EventBridge rule's pattern into queue A and to the stage A router, as in AWS."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lakeline.runtimes.deployed.local_aws.deploy import SKIPPED_TYPES, Deployment
from lakeline.runtimes.deployed.local_aws.functions import FunctionHost
from tests.rehearsal.support import bucket


def template_resources(assembly: Path, stack: str, kind: str) -> list[dict[str, Any]]:
    template = json.loads((assembly / f"{stack}.template.json").read_text())
    return [r for r in template["Resources"].values() if r["Type"] == kind]


def test_both_stacks_are_created_with_their_outputs(deployment: Deployment) -> None:
    assert set(deployment.outputs) == {"Lakeline-dev-Storage", "Lakeline-dev-Pipeline"}
    pipeline = deployment.outputs["Lakeline-dev-Pipeline"]
    assert pipeline["StageAStateMachineArn"].startswith(f"arn:aws:states:{deployment.region}:{deployment.account}:")
    assert pipeline["StageAQueueUrl"].endswith(
        tuple(q.rsplit("/", 1)[-1] for q in deployment.client("sqs").list_queues()["QueueUrls"])
    )


def test_every_function_state_machine_and_role_of_the_templates_exists(deployment: Deployment, assembly: Path) -> None:
    functions = deployment.client("lambda").list_functions(MaxItems=200)["Functions"]
    assert len(functions) == sum(
        len(template_resources(assembly, stack, "AWS::Lambda::Function"))
        for stack in ("Lakeline-dev-Storage", "Lakeline-dev-Pipeline")
    )
    machines = deployment.client("stepfunctions").list_state_machines()["stateMachines"]
    assert len(machines) == 2
    roles = {role["Arn"] for role in deployment.client("iam").list_roles(MaxItems=500)["Roles"]}
    for machine in machines:
        described = deployment.client("stepfunctions").describe_state_machine(
            stateMachineArn=machine["stateMachineArn"]
        )
        assert described["roleArn"] in roles
        assert "athena:startQueryExecution.sync" in described["definition"]


def test_the_query_files_are_deployed_to_the_artifacts_bucket(deployment: Deployment) -> None:
    s3 = deployment.client("s3")
    (artifacts,) = [b["Name"] for b in s3.list_buckets()["Buckets"] if "artifactsbucket" in b["Name"].lower()]
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=artifacts, Prefix="artifacts/athena_queries/")["Contents"]]
    assert any(key.endswith(".sql") for key in keys)


def test_an_arrival_goes_through_the_rule_into_queue_a_and_to_the_router(
    deployment: Deployment, functions: FunctionHost
) -> None:
    s3 = deployment.client("s3")
    key = "engineering/mysql/customers/date=20220120/rehearsal.csv"
    s3.put_object(Bucket=bucket(deployment, "stage"), Key="not/an/arrival.csv", Body=b"a\n1\n")
    s3.put_object(Bucket=bucket(deployment, "raw"), Key=key, Body=b"customer_id,name\n1,a\n")
    functions.settle()  # the queue's pollers deliver apart from the put
    delivered = [
        f"{function} {json.loads(record['body'])['detail']['object']['key']}"
        for function, event, _ in functions.invocations
        for record in (event or {}).get("Records", [])
        if "body" in record and "detail" in json.loads(record["body"])
    ]
    routers = [line for line in delivered if key in line]
    assert routers and all(line.startswith("Lakeline-dev-Pipeline-StageARouter") for line in routers), delivered
    assert not [line for line in delivered if "not/an/arrival.csv" in line]


def test_what_moto_does_not_create_is_known(deployment: Deployment, assembly: Path) -> None:
    """A documented gap of the rehearsal, not a silent one: if moto starts creating these, this fails
    and the list of gaps in docs/development.md must change."""
    assert {
        "AWS::Athena::NamedQuery",
        "AWS::S3::BucketPolicy",
        "AWS::SQS::QueuePolicy",
        "AWS::SNS::TopicPolicy",
        "AWS::CloudWatch::Alarm",
        "AWS::Logs::MetricFilter",
        "AWS::CDK::Metadata",
    } == SKIPPED_TYPES
    named = template_resources(assembly, "Lakeline-dev-Pipeline", "AWS::Athena::NamedQuery")
    assert named and not deployment.client("athena").list_named_queries()["NamedQueryIds"]
    filters = template_resources(assembly, "Lakeline-dev-Pipeline", "AWS::Logs::MetricFilter")
    assert filters and not deployment.client("logs").describe_metric_filters()["metricFilters"]


def test_the_workgroup_catalog_and_layers_moto_skips_are_created(deployment: Deployment, assembly: Path) -> None:
    """What moto's CloudFormation skips or drops and the rehearsal creates itself (``moto_fixes``)."""
    workgroups = [w["Name"] for w in deployment.client("athena").list_work_groups()["WorkGroups"]]
    assert "lakeline-dev" in workgroups
    glue = deployment.client("glue")
    (database,) = template_resources(assembly, "Lakeline-dev-Storage", "AWS::Glue::Database")
    name = database["Properties"]["DatabaseInput"]["Name"]
    tables = {t["Name"] for t in glue.get_tables(DatabaseName=name)["TableList"]}
    assert tables == {
        t["Properties"]["TableInput"]["Name"]
        for t in template_resources(assembly, "Lakeline-dev-Storage", "AWS::Glue::Table")
    }
    deployed = deployment.client("lambda").list_functions(MaxItems=200)["Functions"]
    template = json.loads((assembly / "Lakeline-dev-Pipeline.template.json").read_text())["Resources"]
    for logical_id, resource in template.items():
        if resource["Type"] == "AWS::Lambda::Function":
            (function,) = [f for f in deployed if f"-{logical_id}-" in f["FunctionName"]]
            assert len(function.get("Layers", [])) == len(resource["Properties"].get("Layers", [])), logical_id


def test_the_moto_the_fixes_were_written_for() -> None:
    """``moto_fixes`` patches moto's code: an upgrade must re-check each fix (and may drop some)."""
    import moto

    assert moto.__version__ == "5.2.5", "re-check lakeline/runtimes/deployed/local_aws/moto_fixes.py against this moto"
