"""``cdk deploy`` on one machine: the synthesized cloud assembly (templates and assets) stood up by the
CloudFormation of a local AWS endpoint (moto's server, in this process), as AWS would stand it up.

What ``deploy`` does is what the CDK CLI and CloudFormation do: the bootstrap's SSM parameters and
asset bucket, each file asset uploaded (directories zipped) where its manifest says, then each stack
created in the assembly's dependency order from its template, custom resources included (carried out
in-process: ``moto_fixes``). A stack that does not reach ``CREATE_COMPLETE`` is an error naming the
resources that failed.

What moto's CloudFormation does not create is a gap of this rehearsal, documented by ``SKIPPED_TYPES``
and its test: Athena named queries, resource policies of buckets, queues and topics, CloudWatch
alarms and log metric filters are accepted and not made. (Athena workgroups and Glue databases and tables are created by
``moto_fixes``.) The public Powertools layer the functions name is published into the local endpoint
as a stand-in (``POWERTOOLS_LAYER_ARN``): its packages are the ones installed beside the rehearsal.
"""

from __future__ import annotations

import datetime
import io
import json
import threading
import zipfile
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakeline.aws.clients import client
from lakeline.errors import LakelineError
from lakeline.runtimes.deployed.local_aws import moto_fixes
from lakeline.runtimes.deployed.local_aws.iam import Credentials

SKIPPED_TYPES = frozenset(
    {
        "AWS::Athena::NamedQuery",
        "AWS::S3::BucketPolicy",
        "AWS::SQS::QueuePolicy",
        "AWS::SNS::TopicPolicy",
        "AWS::CloudWatch::Alarm",
        "AWS::Logs::MetricFilter",
        "AWS::CDK::Metadata",
    }
)
"""Resource types moto's CloudFormation accepts without creating anything (moto 5.2.5)."""

BOOTSTRAP_VERSION = "30"
POWERTOOLS_LAYER_NAME = "AWSLambdaPowertoolsPythonV3-python313-x86_64"
POWERTOOLS_LAYER_ARN = "arn:aws:lambda:{region}:017000801446:layer:" + POWERTOOLS_LAYER_NAME + ":1"
"""What the public Powertools layer's SSM parameter resolves to here (moto finds a layer by its name,
so the stand-in ``_publish_powertools_layer`` puts into the account answers for it; the functions run
with the Powertools installed beside the rehearsal, not with this layer's content)."""


class DeployError(LakelineError):
    """A stack of the assembly could not be stood up on the local endpoint."""


@dataclass
class Deployment:
    endpoint: str
    account: str
    region: str
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    """Each stack's outputs, by stack name."""
    credentials: Credentials | None = None
    """Whose requests ``client`` signs (the operator's once IAM is enforced); else the environment's."""

    _clients: dict[tuple[str, Credentials | None, float | None], Any] = field(
        default_factory=dict, repr=False, compare=False
    )
    _making_clients: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def client(self, service: str, *, credentials: Credentials | None = None, read_timeout: float | None = None) -> Any:
        """A client of ``service`` signed by ``credentials`` (else ``self.credentials``). The deployment's own
        are made once and kept: making one loads the service's model (tens of milliseconds), which a client per
        uploaded file paid again each time, and boto3's clients may be shared between threads. A client for
        other ``credentials`` (a role's session, one per job run) is its caller's to keep."""
        signer = credentials or self.credentials

        def make() -> Any:
            return client(
                service,
                region=self.region,
                endpoint_url=self.endpoint,
                credentials=signer.client_arguments() if signer else None,
                read_timeout=read_timeout,
            )

        if credentials is not None:
            return make()
        key = (service, signer, read_timeout)
        with self._making_clients:
            if key not in self._clients:
                self._clients[key] = make()
            return self._clients[key]


DEPLOYER = Credentials("lakeline-deployer", "lakeline-deployer")
"""Who deploys when no credentials are given: any key does before IAM is enforced (``iam.enforce``), and
one moto does not know is its default account's."""


def deploy(
    assembly: Path,
    endpoint: str,
    *,
    region: str = "us-east-1",
    credentials: Credentials | None = None,
    stable_names: bool = False,
) -> Deployment:
    """Stand every stack of the cloud assembly at ``assembly`` (a ``cdk.out``) up on ``endpoint``;
    ``credentials``: whose the deploying requests are (their account is the deployment's), else
    ``DEPLOYER`` (moto's default account); ``stable_names``: the names CloudFormation generates are the
    same each time the assembly is deployed in the account (``moto_fixes.stable_resource_names``), not
    random (two such deployments cannot live in one process's account then)."""
    moto_fixes.install(
        {"Custom::S3BucketNotifications": _bucket_notifications, "Custom::CDKBucketDeployment": _bucket_deployment}
    )
    deployment = Deployment(endpoint, "", region, credentials=credentials or DEPLOYER)
    deployment.account = deployment.client("sts").get_caller_identity()["Account"]
    manifest = json.loads((assembly / "manifest.json").read_text())
    stacks = _stacks_in_order(manifest)
    _publish_powertools_layer(deployment)
    for name in stacks:
        _seed_parameters(deployment, json.loads((assembly / f"{name}.template.json").read_text()))
        _upload_assets(deployment, assembly, manifest, name)
    with moto_fixes.stable_resource_names(deployment.account, region) if stable_names else nullcontext():
        for name in stacks:
            _create_stack(deployment, assembly, name)
    return deployment


def _create_stack(deployment: Deployment, assembly: Path, name: str) -> None:
    cloudformation = deployment.client("cloudformation")
    cloudformation.create_stack(
        StackName=name,
        TemplateBody=(assembly / f"{name}.template.json").read_text(),
        Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
    )
    stack = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
    if stack["StackStatus"] != "CREATE_COMPLETE":
        failed = [
            f"{r['LogicalResourceId']} ({r['ResourceType']}): {r['ResourceStatus']}"
            for r in cloudformation.list_stack_resources(StackName=name)["StackResourceSummaries"]
            if r["ResourceStatus"] != "CREATE_COMPLETE"
        ]
        raise DeployError(f"stack {name} is {stack['StackStatus']}: " + ("; ".join(failed) or "no resource failed"))
    deployment.outputs[name] = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def _stacks_in_order(manifest: dict[str, Any]) -> list[str]:
    """The assembly's stacks, each after the stacks it depends on (``cdk deploy --all``'s order)."""
    artifacts = manifest["artifacts"]
    stacks = {name for name, artifact in artifacts.items() if artifact["type"] == "aws:cloudformation:stack"}
    ordered: list[str] = []

    def visit(name: str) -> None:
        if name in ordered:
            return
        for dependency in artifacts[name].get("dependencies", []):
            if dependency in stacks:
                visit(dependency)
        ordered.append(name)

    for name in sorted(stacks):
        visit(name)
    return ordered


def _seed_parameters(deployment: Deployment, template: dict[str, Any]) -> None:
    """The SSM parameters the templates resolve at deploy time: the bootstrap's version, and the public
    Powertools layer's ARN (under ``/aws/``, which only AWS may write: put into moto's backend)."""
    from moto.ssm.models import Parameter, ssm_backends

    new_parameter: Any = Parameter  # abstract for mypy; moto's own backend instantiates it the same way

    backend = ssm_backends[deployment.account][deployment.region]
    for parameter in template.get("Parameters", {}).values():
        if not parameter["Type"].startswith("AWS::SSM::Parameter::Value"):
            continue
        name = parameter["Default"]
        value = (
            BOOTSTRAP_VERSION
            if name.startswith("/cdk-bootstrap/")
            else POWERTOOLS_LAYER_ARN.format(region=deployment.region)
        )
        if backend._parameters.get(name):
            continue
        backend._parameters[name].append(
            new_parameter(
                deployment.account,
                name,
                value,
                "String",
                None,
                None,
                None,
                datetime.datetime.now(datetime.UTC),
                1,
                "text",
            )
        )


def _publish_powertools_layer(deployment: Deployment) -> None:
    layers = deployment.client("lambda")
    if not layers.list_layer_versions(LayerName=POWERTOOLS_LAYER_NAME)["LayerVersions"]:
        empty = io.BytesIO()
        zipfile.ZipFile(empty, "w").close()
        layers.publish_layer_version(
            LayerName=POWERTOOLS_LAYER_NAME,
            Description="stand-in for the public Powertools layer (its packages come from the rehearsal's Python)",
            Content={"ZipFile": empty.getvalue()},
        )


def _upload_assets(deployment: Deployment, assembly: Path, manifest: dict[str, Any], stack: str) -> None:
    """Each file asset of ``stack``, where its asset manifest says (directories zipped, as cdk-assets does)."""
    s3 = deployment.client("s3")
    assets_file = assembly / f"{stack}.assets.json"
    if not assets_file.exists():
        return
    for asset in json.loads(assets_file.read_text()).get("files", {}).values():
        source = assembly / asset["source"]["path"]
        body = _zipped(source) if asset["source"].get("packaging") == "zip" else source.read_bytes()
        for destination in asset["destinations"].values():
            bucket = (
                destination["bucketName"]
                .replace("${AWS::AccountId}", deployment.account)
                .replace("${AWS::Region}", deployment.region)
            )
            try:
                s3.head_bucket(Bucket=bucket)
            except s3.exceptions.ClientError:
                s3.create_bucket(Bucket=bucket)
            s3.put_object(Bucket=bucket, Key=destination["objectKey"], Body=body)


def _zipped(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()


def _bucket_notifications(account: str, region: str, properties: dict[str, Any]) -> dict[str, Any]:
    """What CDK's ``Custom::S3BucketNotifications`` handler does: put the bucket's notification
    configuration (Lakeline's: EventBridge for the raw bucket)."""
    from moto.s3.models import s3_backends

    bucket = s3_backends[account]["aws"].get_bucket(properties["BucketName"])
    bucket.set_notification_configuration(properties["NotificationConfiguration"])
    return {}


def _bucket_deployment(account: str, region: str, properties: dict[str, Any]) -> dict[str, Any]:
    """What CDK's ``Custom::CDKBucketDeployment`` does (its handler runs the AWS CLI from a layer, which
    does not run here): each source zip's files copied under the destination prefix."""
    from moto.s3.models import s3_backends

    backend = s3_backends[account]["aws"]
    prefix = properties.get("DestinationBucketKeyPrefix", "")
    for source_bucket, source_key in zip(properties["SourceBucketNames"], properties["SourceObjectKeys"], strict=True):
        archive = backend.get_object(source_bucket, source_key)
        if archive is None:
            raise DeployError(f"bucket deployment source s3://{source_bucket}/{source_key} is missing")
        with zipfile.ZipFile(io.BytesIO(archive.value)) as files:
            for name in files.namelist():
                if not name.endswith("/"):
                    backend.put_object(properties["DestinationBucketName"], f"{prefix}{name}", files.read(name))
    return {}
