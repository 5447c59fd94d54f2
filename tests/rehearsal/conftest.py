"""The rehearsal tier: the CDK app is synthesized once per session and its cloud assembly stood up on a
moto server in this process (``lakeline.runtimes.deployed.local_aws.deploy``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from lakeline.lineage.openlineage.archive import EVENTS_FOLDER
from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.executions import ExecutionHost
from lakeline.runtimes.deployed.local_aws.functions import FunctionHost
from lakeline.runtimes.deployed.local_aws.system import deployed, execution_host, function_host, synthesize_cached
from tests.openlineage_schema import EventSchemaError, validate_event
from tests.rehearsal.support import CHECKED_TABLE_SETTINGS, bucket

if TYPE_CHECKING:
    from lakeline.engines.spark import SparkEngine
    from lakeline.runtimes.deployed.local_aws.athena import LocalAthena


@pytest.fixture(scope="package")
def assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``cdk synth`` of the app as users deploy it (athena engine), into a cloud assembly folder; one table carries
    quality checks (``tests/rehearsal/test_quality_gates.py``)."""
    context = {"environment": "dev", "engine": "athena", "table_settings": CHECKED_TABLE_SETTINGS}
    return synthesize_cached(tmp_path_factory.mktemp("cdk.out"), context)


@pytest.fixture(scope="package")
def deployment(assembly: Path) -> Iterator[Deployment]:
    with deployed(assembly) as stood:
        yield stood


@pytest.fixture(scope="package")
def functions(
    deployment: Deployment, assembly: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FunctionHost]:
    """The deployed functions, run from their bundled assets whenever moto invokes one."""
    host = function_host(deployment, assembly, tmp_path_factory.mktemp("logs"))
    host.install()
    yield host
    host.uninstall()


@pytest.fixture(scope="package")
def executions(deployment: Deployment, functions: FunctionHost, local_athena: LocalAthena) -> Iterator[ExecutionHost]:
    """Every execution started on the endpoint, run by the ASL interpreter over the synthesized definition
    (Athena tasks on the local Athena, Lambda tasks by the bundled functions)."""
    host = execution_host(deployment, functions)
    host.install()
    yield host
    host.uninstall()


@pytest.fixture(scope="package")
def local_athena(
    deployment: Deployment, spark_engine: SparkEngine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalAthena]:
    """The endpoint's Athena runs each query on the session's Spark, against its Glue and S3
    (``lakeline.runtimes.deployed.local_aws.athena``); Spark databases are prefixed, apart from other tiers' tables."""
    from lakeline.runtimes.deployed.local_aws.athena import install_local_athena

    athena = install_local_athena(
        spark_engine, tmp_path_factory.mktemp("athena-mirror"), database_prefix="athena_rehearsal__"
    )
    yield athena
    athena.stop()


@pytest.fixture(scope="package")
def checked_events() -> dict[str, str]:
    """The archived events already checked against the schemas: each object's key, with its ETag."""
    return {}


@pytest.fixture(autouse=True)
def archived_events_follow_the_openlineage_schemas(
    request: pytest.FixtureRequest, checked_events: dict[str, str]
) -> Iterator[None]:
    """The deployed functions run in subprocess workers, out of reach of the check every in-process event
    goes through (``tests/conftest.py``): after each test that stood the deployment up, every event they
    archived since (the archive bucket's events folder) is checked, so a bad event fails the test that made it."""
    deployment = request.getfixturevalue("deployment") if "deployment" in request.fixturenames else None
    yield
    if deployment is None:
        return
    s3 = deployment.client("s3")
    archive = bucket(deployment, "lineagearchive")
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=archive, Prefix=EVENTS_FOLDER):
        for listed in page.get("Contents", []):
            key, etag = listed["Key"], listed["ETag"]
            if checked_events.get(key) == etag:
                continue  # a retried step rewrites its events onto the same keys: checked again only if changed
            body = s3.get_object(Bucket=archive, Key=key)["Body"].read()
            try:
                validate_event(json.loads(body))
            except EventSchemaError as error:
                raise EventSchemaError(f"s3://{archive}/{key}: {error}") from None
            checked_events[key] = etag
