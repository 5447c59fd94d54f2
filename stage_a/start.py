"""Starting stage A for an arrival: validate, plan against the catalog, start the state machine."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from lakeline.engines.base import TableSchema
from lakeline.lambda_support import start_execution_once
from lakeline.settings import PipelineSettings
from stage_a.arrivals import Arrival
from stage_a.keys import parse_raw_key
from stage_a.plan import StageAPlan, new_run_token, plan_stage_a

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

logger = logging.getLogger(__name__)


class Catalog(Protocol):
    def describe_table(self, database: str, table: str) -> TableSchema: ...


@dataclass(frozen=True)
class StartedRun:
    execution_name: str
    execution_arn: str | None
    duplicate: bool
    plan: StageAPlan


def plan_arrival(arrival: Arrival, settings: PipelineSettings, catalog: Catalog) -> tuple[str, StageAPlan]:
    """The plan for an arrival, fixed by the arrival itself: a redelivery yields the very same plan."""
    raw = parse_raw_key(arrival.key)
    schema = catalog.describe_table(settings.raw_database(raw.team, raw.dataset), raw.table)
    name = arrival.execution_name(f"{raw.dataset}-{raw.table}")
    token = new_run_token(arrival.event_time, unique=name)
    return name, plan_stage_a(raw, settings, schema, run_token=token)


def start_stage_a(
    arrival: Arrival,
    settings: PipelineSettings,
    catalog: Catalog,
    sfn: SFNClient,
    state_machine_arn: str,
    extra_input: dict[str, Any] | None = None,
) -> StartedRun:
    name, plan = plan_arrival(arrival, settings, catalog)
    payload = {"arrival": arrival.model_dump(mode="json"), "plan": plan.to_dict(), **(extra_input or {})}
    started, duplicate = start_execution_once(sfn, state_machine_arn, name, json.dumps(payload))
    if duplicate:
        logger.info("arrival %s already started as %s; redelivery ignored", arrival.identity, started)
    return StartedRun(started, None, duplicate, plan)
