"""EventBridge as the deployed rules need it, on moto: Lambda targets delivered, scheduled rules fired, and
Step Functions' execution status changes put on the default bus.

- A rule's Lambda target (moto raises ``NotImplementedError`` for one) is invoked as EventBridge invokes it:
  asynchronously for the rule, with the event (its ``time`` an ISO timestamp, as AWS sends it), retried twice when
  the function fails (Lambda's asynchronous retries), through moto's Lambda ``invoke``, which the rehearsal's
  functions serve (``functions.FunctionHost``). A rule with a schedule matches no event, as in AWS.
- ``fire_schedules`` delivers the "Scheduled Event" of the scheduled rules (those whose name holds ``matching``)
  to their targets, as their schedule would: the rehearsal runs no clock of its own, so a test or a command fires
  them when it means the time to have come.
- ``put_status_change``: what Step Functions sends when an execution ends (``executions.ExecutionHost`` calls it),
  the "Execution Status Change" event of the execution, matched against every rule of the default bus.

Known difference: the invocation is not authorized against the function's resource policy (moto's EventBridge
calls moto's Lambda backend directly); ``tests/infrastructure`` checks that the stacks grant it.
"""

from __future__ import annotations

import datetime
import json
import logging
from typing import Any

from lakeline.aws.stepfunctions import STATUS_CHANGE

logger = logging.getLogger(__name__)

ASYNC_ATTEMPTS = 3  # Lambda's asynchronous invocation: the first and two retries


def _iso(moment: Any) -> str:
    if isinstance(moment, int | float):
        moment = datetime.datetime.fromtimestamp(moment, datetime.UTC)
    if isinstance(moment, datetime.datetime):
        return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(moment)


def invoke_target(account: str, region: str, target_arn: str, event: dict[str, Any]) -> bool:
    """Invoke a rule's Lambda target with ``event``; whether it succeeded within its attempts."""
    from moto.awslambda.utils import get_backend

    function = get_backend(account, region).get_function(target_arn)
    body = json.dumps({**event, "time": _iso(event.get("time"))})
    for attempt in range(1, ASYNC_ATTEMPTS + 1):
        headers: dict[str, str] = {}
        try:
            function.invoke(body, {}, headers)
        except Exception as error:  # the invocation itself broke (no function host serves it)
            logger.error("rule target %s could not be invoked: %s", target_arn, error)
            return False
        if "x-amz-function-error" not in headers:
            return True
        logger.warning("rule target %s failed (attempt %d of %d)", target_arn, attempt, ASYNC_ATTEMPTS)
    return False


def lambda_targets(rule: Any) -> list[str]:
    return [target["Arn"] for target in rule.targets if target["Arn"].split(":")[2] == "lambda"]


def deliver(rule: Any, event: dict[str, Any]) -> None:
    """The rule's Lambda targets, for an event it matched (moto delivers its other targets)."""
    for arn in lambda_targets(rule):
        invoke_target(rule.account_id, rule.region_name, arn, event)


def fire_schedules(account: str, region: str, matching: str = "") -> list[str]:
    """Deliver the scheduled event of each enabled scheduled rule of the default bus whose name holds
    ``matching``; the names of the rules fired."""
    from moto.events.models import events_backends

    bus = events_backends[account][region].describe_event_bus("default")
    fired: list[str] = []
    for rule in list(bus.rules.values()):
        if not rule.scheduled_expression or rule.state != "ENABLED" or matching not in rule.name:
            continue
        now = datetime.datetime.now(datetime.UTC)
        event = {
            "version": "0",
            "id": f"schedule-{rule.name}-{now.timestamp():.0f}",
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": account,
            "time": _iso(now),
            "region": region,
            "resources": [rule.arn],
            "detail": {},
        }
        deliver(rule, event)
        fired.append(rule.name)
    return fired


def put_status_change(account: str, region: str, detail: dict[str, Any]) -> None:
    """Step Functions' event for an execution whose status changed to ``detail["status"]``."""
    from moto.events.models import events_backends

    events_backends[account][region].put_events(
        [
            {
                "Source": "aws.states",
                "DetailType": STATUS_CHANGE,
                "Detail": json.dumps(detail),
                "Resources": [detail["executionArn"]],
            }
        ]
    )
