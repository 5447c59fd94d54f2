"""Lambda's 4 KB bound on a function's environment, checked at synth for every function of the app, so that a project
whose settings outgrow it fails ``cdk synth`` naming the function and its biggest variables, not ``cdk deploy``
half-way in AWS."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii

from lakeline.aws.lambda_limits import ENVIRONMENT_LIMIT_BYTES, biggest_variables, environment_bytes

REFERENCE_BYTES = 160
"""What a value CloudFormation fills in at deploy time (a ``Ref``, ``Fn::GetAtt``, ``Fn::ImportValue``) counts here:
more than the longest the app's references resolve to (an SQS queue URL or a state machine ARN: about 60 bytes of
service, region and account, and a generated name of at most 80)."""


RULE = "LambdaEnvironment4KB"


def estimated_bytes(value: Any) -> int:
    """Bytes ``value`` (a resolved template value) takes once deployed: a string as written, a ``Fn::Join`` its parts
    together, any other reference ``REFERENCE_BYTES``."""
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, dict) and list(value) == ["Fn::Join"]:
        separator, parts = value["Fn::Join"]
        if isinstance(parts, list):
            return sum(estimated_bytes(part) for part in parts) + len(str(separator).encode()) * max(len(parts) - 1, 0)
    return REFERENCE_BYTES


def estimated_environment(variables: dict[str, Any]) -> dict[str, str]:
    """``variables`` with each value replaced by one of its estimated size (``environment_bytes`` then measures it)."""
    return {name: "x" * estimated_bytes(value) for name, value in variables.items()}


def oversized_functions(template: dict[str, Any]) -> dict[str, str]:
    """Each function of ``template`` (logical id) over the bound, with why."""
    found: dict[str, str] = {}
    for logical_id, resource in template.get("Resources", {}).items():
        if resource.get("Type") != "AWS::Lambda::Function":
            continue
        variables = resource.get("Properties", {}).get("Environment", {}).get("Variables") or {}
        estimated = estimated_environment(variables)
        size = environment_bytes(estimated)
        if size > ENVIRONMENT_LIMIT_BYTES:
            path = resource.get("Metadata", {}).get("aws:cdk:path", logical_id)
            sizes = {name: len(name.encode()) + len(value) for name, value in estimated.items()}
            found[logical_id] = (
                f"function {path}: its environment measures about {size} bytes once deployed, over Lambda's "
                f"{ENVIRONMENT_LIMIT_BYTES}-byte (4 KB) limit, which fails the deployment; the biggest variables: "
                f"{biggest_variables(sizes)}"
            )
    return found


@jsii.implements(cdk.IPolicyValidationPlugin)
class EnvironmentBound:
    """Every function of the synthesized templates (ours and those constructs add) within the bound: a validation
    plugin reads the templates as written, references included, so the synth fails on a function over it."""

    @property
    def name(self) -> str:
        return "lakeline-lambda-environment-bound"

    @property
    def version(self) -> str:
        return "1"

    @property
    def rule_ids(self) -> list[str]:
        return [RULE]

    def validate(self, context: cdk.IPolicyValidationContext) -> cdk.PolicyValidationPluginReport:
        violations = []
        for template_path in context.template_paths:
            for logical_id, why in oversized_functions(json.loads(Path(template_path).read_text())).items():
                violations.append(
                    cdk.PolicyViolation(
                        rule_name=RULE,
                        description=why,
                        fix="pass large settings in the code asset (stacks.constructs.functions.SharedLambdaCode), "
                        "not the environment",
                        violating_resources=[
                            cdk.PolicyViolatingResource(
                                resource_logical_id=logical_id,
                                template_path=template_path,
                                locations=["Properties.Environment.Variables"],
                            )
                        ],
                    )
                )
        return cdk.PolicyValidationPluginReport(success=not violations, violations=violations)
