"""The rehearsal tier: the CDK app is synthesized once per session and its cloud assembly stood up on a
moto server in this process (``lakeline.local.rehearsal.deploy``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from lakeline.local.rehearsal.deploy import Deployment
from lakeline.local.rehearsal.executions import ExecutionHost
from lakeline.local.rehearsal.functions import FunctionHost
from lakeline.local.rehearsal.system import deployed, execution_host, function_host, synthesize

if TYPE_CHECKING:
    from lakeline.engines.spark import SparkEngine
    from lakeline.local.rehearsal.athena import LocalAthena


@pytest.fixture(scope="package")
def assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``cdk synth`` of the app as users deploy it (athena engine), into a cloud assembly folder."""
    return synthesize(tmp_path_factory.mktemp("cdk.out"), {"environment": "dev", "engine": "athena"})


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
    host = execution_host(deployment)
    host.install()
    yield host
    host.uninstall()


@pytest.fixture(scope="package")
def local_athena(
    deployment: Deployment, spark_engine: SparkEngine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalAthena]:
    """The endpoint's Athena runs each query on the session's Spark, against its Glue and S3
    (``lakeline.local.rehearsal.athena``); Spark databases are prefixed, apart from other tiers' tables."""
    from lakeline.local.rehearsal.athena import install_local_athena

    athena = install_local_athena(
        spark_engine, tmp_path_factory.mktemp("athena-mirror"), database_prefix="athena_rehearsal__"
    )
    yield athena
    athena.stop()
