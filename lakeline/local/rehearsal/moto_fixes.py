"""What moto (pinned in constraints.txt) needs to stand Lakeline's synthesized stacks up as CloudFormation
would, each fix small and named by the defect it works around. ``install`` applies them once, in the
process that runs the moto server; ``tests/rehearsal/test_moto_fixes.py`` fails when a moto upgrade
changes the code they patch.

- ``AWS::KMS::Key`` with ``Tags``: moto's model passes CloudFormation's ``Key``/``Value`` tags to a
  backend that expects ``TagKey``/``TagValue``; the stack then fails with a misleading ``Fn::GetAtt``
  error about the key.
- EventBridge: S3's delivery loops over every rule inside one bare ``except``, and a rule with a Lambda
  target (the nightly lineage schedule) raises ``NotImplementedError``, which silently stops delivery to
  every other rule (the raw-arrival rule into queue A). A Lambda target is skipped here instead; the
  rehearsal invokes functions itself.
- Custom resources: moto invokes their handler function in Docker and waits for a response to a URL
  inside Docker. Here they are carried out in-process (``custom_resources``), as the CDK handlers would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

CustomResourceHandler = Callable[[str, str, dict[str, Any]], dict[str, Any]]
"""(account, region, the resource's properties) → the attributes it returns (``Fn::GetAtt``)."""

_installed = threading.Lock()
_done = False


def install(custom_resources: dict[str, CustomResourceHandler]) -> None:
    """Apply the fixes (once per process); ``custom_resources`` maps a resource type to its handler."""
    global _done
    with _installed:
        if _done:
            return
        _fix_kms_key_tags()
        _fix_events_lambda_targets()
        _carry_out_custom_resources(custom_resources)
        _done = True


def _fix_kms_key_tags() -> None:
    import moto.kms.models as kms_models

    original = getattr(kms_models.Key.create_from_cloudformation_json, "__func__")  # noqa: B009 (untyped)

    def create(cls: Any, resource_name: str, cloudformation_json: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        properties = cloudformation_json.get("Properties", {})
        tags = properties.get("Tags") or []
        if tags and "Key" in tags[0]:
            properties["Tags"] = [{"TagKey": tag["Key"], "TagValue": tag["Value"]} for tag in tags]
        return original(cls, resource_name, cloudformation_json, *args, **kwargs)

    setattr(kms_models.Key, "create_from_cloudformation_json", classmethod(create))  # noqa: B010


def _fix_events_lambda_targets() -> None:
    import moto.events.models as events_models

    original = events_models.Rule.send_to_targets

    def send_to_targets(self: Any, event: Any, transform_input: bool = True) -> Any:
        try:
            return original(self, event, transform_input=transform_input)
        except NotImplementedError:
            return None  # a Lambda target: not delivered by moto; the other rules still are

    setattr(events_models.Rule, "send_to_targets", send_to_targets)  # noqa: B010


def _carry_out_custom_resources(handlers: dict[str, CustomResourceHandler]) -> None:
    import moto.cloudformation.custom_model as custom_model
    from moto.cloudformation.models import cloudformation_backends

    def create(
        cls: Any,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> Any:
        resource_type = kwargs["ResourceType"]
        handler = handlers.get(resource_type)
        if handler is None:
            raise NotImplementedError(f"the rehearsal cannot carry out custom resource {resource_type}")
        model: Any = custom_model.CustomModel  # abstract for mypy; moto instantiates it the same way
        resource = model(region_name, "rehearsal", kwargs["LogicalId"], resource_name)
        cloudformation_backends[account_id][region_name].get_stack(kwargs["StackId"]).add_custom_resource(resource)
        resource.set_data(handler(account_id, region_name, cloudformation_json["Properties"]))
        return resource

    setattr(custom_model.CustomModel, "create_from_cloudformation_json", classmethod(create))  # type: ignore[arg-type]  # noqa: B010
