"""Deployment configuration, read from CDK context in ``app.py`` only and passed down as an object."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pydantic

from lakeline.commits.slots import DEFAULT_RUNS_IN_FLIGHT
from lakeline.errors import ConfigError, field_path, validation_problems
from lakeline.lineage.openlineage.producer import ATHENA_ENGINE_VERSION, GLUE_SPARK_VERSIONS, glue_spark_version
from lakeline.names import check_identifier
from lakeline.run_order import EngineName
from lakeline.settings import TableSettings

LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
"""The retentions CloudWatch Logs accepts (``AWS::Logs::LogGroup`` ``RetentionInDays``)."""

# What the stages' OpenLineage functions are told by the stack itself (stacks/constructs/openlineage.py):
# where events are stored, the job namespace, the datasets' namespace, the Glue catalog the tables' symlinks
# name, the engine that ran the SQL and its version (the functions run neither Athena nor the Glue job's Spark).
OPENLINEAGE_EVENTS_LOCATION = "OPENLINEAGE_EVENTS_LOCATION"
OPENLINEAGE_NAMESPACE = "OPENLINEAGE_NAMESPACE"
OPENLINEAGE_DATASET_NAMESPACE = "OPENLINEAGE_DATASET_NAMESPACE"
OPENLINEAGE_GLUE_CATALOG = "OPENLINEAGE_GLUE_CATALOG"
PIPELINE_ENGINE = "PIPELINE_ENGINE"
PIPELINE_ENGINE_VERSION = "PIPELINE_ENGINE_VERSION"
STACK_OPENLINEAGE_VARIABLES = frozenset(
    {
        OPENLINEAGE_EVENTS_LOCATION,
        OPENLINEAGE_NAMESPACE,
        OPENLINEAGE_DATASET_NAMESPACE,
        OPENLINEAGE_GLUE_CATALOG,
        PIPELINE_ENGINE,
        PIPELINE_ENGINE_VERSION,
    }
)
# openlineage-python's own variables (OPENLINEAGE_URL, OPENLINEAGE__TRANSPORT__TYPE, ...), as Lambda accepts names.
OPENLINEAGE_VARIABLE = re.compile(r"^OPENLINEAGE_[A-Za-z0-9_]+$")


def openlineage_environment(value: Any) -> dict[str, str]:
    """The context's ``openlineage_environment``: a JSON object (or its text, as ``-c`` passes it) of
    standard OpenLineage variables for the functions that emit events, e.g. a transport."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise ConfigError(f"context openlineage_environment is not a JSON object: {error}") from error
    if not isinstance(value, dict):
        raise ConfigError(f"context openlineage_environment must be an object of variables, got {type(value).__name__}")
    for key, setting in value.items():
        if not isinstance(key, str) or not OPENLINEAGE_VARIABLE.match(key):
            raise ConfigError(
                f"context openlineage_environment key {key!r} is not an OpenLineage variable (OPENLINEAGE_...)"
            )
        if key in STACK_OPENLINEAGE_VARIABLES:
            raise ConfigError(f"context openlineage_environment key {key!r} is set by the stack and cannot be changed")
        if not isinstance(setting, str):
            raise ConfigError(
                f"context openlineage_environment key {key!r} must be a string, got {type(setting).__name__} "
                f"(write it quoted: {json.dumps(json.dumps(setting))})"
            )
    return dict(value)


@dataclass(frozen=True)
class LakelineConfig:
    """What a deployment may choose. Every field has a default that deploys a working pipeline."""

    environment: str = "dev"
    engine: EngineName = "athena"
    lineage_ttl_hours: int = 24
    table_settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    default_table_settings: dict[str, Any] = field(default_factory=dict)
    powertools_layer_parameter: str = "/aws/service/powertools/python/x86_64/python3.13/latest"
    glue_version: str = "5.0"
    glue_workers: int = 2
    alarm_email: str | None = None
    trace_schedule: str = "cron(0 2 * * ? *)"
    # How long a lineage root must be quiet before the nightly trace takes it (its runs may still be writing).
    trace_settle_seconds: int = 120
    # Concurrent invocations of each router (queue A, queue B): a burst of arrivals is planned and
    # started at this pace instead of scaling out to hundreds of routers that throttle Glue and Step
    # Functions. Lambda's SQS event sources accept 2 to 1000.
    router_max_concurrency: int = 10
    # Executions in flight per stage (lakeline.commits.slots): a run waits in its queue for a free slot
    # instead of being throttled by Athena (~20-25 DML queries at once) or Glue (20 concurrent runs) and parked.
    runs_in_flight: int = DEFAULT_RUNS_IN_FLIGHT
    # Standard OpenLineage variables for the functions that emit events (a transport: OPENLINEAGE_URL, ...).
    # Empty: the events are only kept in the lineage archive bucket.
    openlineage_environment: dict[str, str] = field(default_factory=dict)
    # The most one Athena statement may scan before Athena cancels it (the workgroup's cutoff), in GB; 0: none.
    # A stage B step that scans a whole table by mistake stops there instead of billing its whole size (#40).
    athena_scan_cutoff_gb: int = 1000
    # What the lake keeps besides its data (#40). Every commit writes a partition's new version as new objects and
    # the sweep deletes the superseded one after its grace period: in a versioned bucket that delete only makes the
    # old copy noncurrent, so the stage and analytics buckets keep noncurrent versions a few days (an operator's
    # undo), the raw, artifacts and lineage archive buckets a month (they are not rewritten by the pipeline).
    derived_noncurrent_days: int = 3
    noncurrent_days: int = 30
    # An upload or multipart copy (the commits' carries) not completed by then is aborted and its parts deleted.
    incomplete_upload_days: int = 1
    # Athena's query results (read once, by the task that ran the query) expire after this many days.
    athena_results_days: int = 7
    # Every log group's retention (functions, state machines, the Glue job), one of CloudWatch's allowed values.
    log_retention_days: int = 30

    @property
    def engine_version(self) -> str:
        """The version of the engine the deployed steps run on: the Glue job's Spark, or Athena's engine."""
        if self.engine == "athena":
            return ATHENA_ENGINE_VERSION
        spark = glue_spark_version(self.glue_version)
        if spark is None:  # from_context refuses it; a config built by hand may still name one
            raise ConfigError(f"glue_version={self.glue_version!r} is not a Glue version Lakeline knows")
        return spark

    @classmethod
    def from_context(cls, context: dict[str, Any]) -> LakelineConfig:
        requested = str(context.get("engine", "athena"))
        if requested not in ("athena", "spark"):
            raise ConfigError(f"context engine={requested!r} must be athena or spark")
        engine: EngineName = "spark" if requested == "spark" else "athena"
        environment = check_identifier(str(context.get("environment", "dev")), "environment")
        ttl = int(context.get("lineage_ttl_hours", 24))
        if not 1 <= ttl <= 24 * 366:
            raise ConfigError(f"context lineage_ttl_hours={ttl} must be between 1 and 8784")
        routers = int(context.get("router_max_concurrency", cls.router_max_concurrency))
        if not 2 <= routers <= 1000:
            raise ConfigError(f"context router_max_concurrency={routers} must be between 2 and 1000")
        in_flight = int(context.get("runs_in_flight", cls.runs_in_flight))
        if not 1 <= in_flight <= 1000:
            raise ConfigError(f"context runs_in_flight={in_flight} must be between 1 and 1000")
        settle = int(context.get("trace_settle_seconds", cls.trace_settle_seconds))
        if not 0 <= settle <= 24 * 3600:
            raise ConfigError(f"context trace_settle_seconds={settle} must be between 0 and 86400")
        cutoff = int(context.get("athena_scan_cutoff_gb", cls.athena_scan_cutoff_gb))
        if cutoff < 0:
            raise ConfigError(f"context athena_scan_cutoff_gb={cutoff} must be 0 (no cutoff) or more")
        storage_days = {
            key: _days(context, key, getattr(cls, key))
            for key in ("derived_noncurrent_days", "noncurrent_days", "incomplete_upload_days", "athena_results_days")
        }
        log_retention = int(context.get("log_retention_days", cls.log_retention_days))
        if log_retention not in LOG_RETENTION_DAYS:
            allowed = ", ".join(map(str, LOG_RETENTION_DAYS))
            raise ConfigError(f"context log_retention_days={log_retention} must be one of CloudWatch's: {allowed}")
        glue_version = str(context.get("glue_version", cls.glue_version))
        if glue_spark_version(glue_version) is None:
            known = ", ".join(GLUE_SPARK_VERSIONS)
            raise ConfigError(f"context glue_version={glue_version!r} must be a Glue version with Spark: {known}")
        return cls(
            environment=environment,
            engine=engine,
            lineage_ttl_hours=ttl,
            table_settings=checked_table_settings(context.get("table_settings", {})),
            default_table_settings=checked_table_settings({"default": context.get("default_table_settings", {})})[
                "default"
            ],
            powertools_layer_parameter=str(context.get("powertools_layer_parameter", cls.powertools_layer_parameter)),
            glue_version=glue_version,
            glue_workers=int(context.get("glue_workers", cls.glue_workers)),
            alarm_email=context.get("alarm_email") or None,
            trace_schedule=str(context.get("trace_schedule", cls.trace_schedule)),
            trace_settle_seconds=settle,
            router_max_concurrency=routers,
            runs_in_flight=in_flight,
            openlineage_environment=openlineage_environment(context.get("openlineage_environment", {})),
            athena_scan_cutoff_gb=cutoff,
            log_retention_days=log_retention,
            **storage_days,
        )


def checked_table_settings(value: Any) -> dict[str, dict[str, Any]]:
    """The context's table settings as given, once they validate as the routers will read them (``TableSettings``,
    its quality checks among them): an invalid rule is refused at synth, naming it, not by the first arrival."""
    if not isinstance(value, dict):
        raise ConfigError(f"context table_settings must be an object keyed database.table, got {value!r}")
    problems: list[str] = []
    for name, settings in value.items():
        try:
            TableSettings.model_validate(settings)
        except pydantic.ValidationError as error:
            problems += validation_problems(error, path=partial(_table_path, name))
    if problems:
        raise ConfigError("context table_settings: " + "; ".join(problems))
    return {str(name): dict(settings) for name, settings in value.items()}


def _table_path(table: str, location: Sequence[int | str]) -> str:
    return field_path((table, *location))


def _days(context: dict[str, Any], key: str, default: int) -> int:
    """A lifecycle period of ``context``: whole days, at least one (S3 expires nothing sooner)."""
    value = context.get(key, default)
    try:
        days = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"context {key}={value!r} must be a whole number of days") from None
    if days < 1 or str(days) != str(value).strip():
        raise ConfigError(f"context {key}={value!r} must be a whole number of days, 1 or more")
    return days
