"""The rehearsal of the ``-c engine=spark`` deployment: the same app synthesized with the Spark engine and
stood up on a moto server of its own, in an account of its own (moto's backends are shared by every
server of this process: the account keeps its stacks, buckets and tables apart from the Athena engine's
deployment of ``tests/rehearsal/conftest.py``). Its stage state machines' Glue job tasks run the job's
script from the cloud assembly on the session's Spark (``lakeline.runtimes.deployed.local_aws.glue``).

The fixtures have the names of the parent tier's, which they replace here; the parent's are never active
at the same time (``_alone``: their patches of moto would serve this deployment's executions too)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from lakeline.runtimes.deployed.local_aws import iam
from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.executions import ExecutionHost
from lakeline.runtimes.deployed.local_aws.functions import FunctionHost
from lakeline.runtimes.deployed.local_aws.system import deployed, execution_host, function_host, synthesize

if TYPE_CHECKING:
    from lakeline.engines.spark import SparkEngine
    from lakeline.runtimes.deployed.local_aws.athena import LocalAthena
    from lakeline.runtimes.deployed.local_aws.glue import LocalGlue

ACCOUNT = "210987654321"


def _alone() -> None:
    """Nothing else of the rehearsal is installed in this process (another tier's hosts or endpoints)."""
    import moto.awslambda.models as lambda_models
    import moto.stepfunctions.models as sfn_models

    from lakeline.runtimes.deployed.local_aws import athena_api

    patched = [
        name
        for name, function in (
            ("ExecutionHost", sfn_models.StateMachine.start_execution),
            ("FunctionHost", lambda_models.LambdaFunction.invoke),
        )
        if "<locals>" in function.__qualname__
    ]
    if athena_api.current is not None:
        patched.append("LocalAthena")
    assert not patched, f"another rehearsal's {patched} still installed: the tiers cannot run at once"


@pytest.fixture(scope="package")
def assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``cdk synth`` of the app with the Spark engine (``-c engine=spark``)."""
    return synthesize(tmp_path_factory.mktemp("cdk.out.spark"), {"environment": "dev", "engine": "spark"})


@pytest.fixture(scope="package")
def deployment(assembly: Path) -> Iterator[Deployment]:
    _alone()
    # Its account is where the requests the operator signs act.
    with deployed(assembly, credentials=iam.operator_credentials(ACCOUNT)) as stood:
        assert stood.account == ACCOUNT
        yield stood


@pytest.fixture(scope="package")
def functions(
    deployment: Deployment, assembly: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FunctionHost]:
    host = function_host(deployment, assembly, tmp_path_factory.mktemp("spark-logs"))
    host.install()
    yield host
    host.uninstall()


@pytest.fixture(scope="package")
def local_athena(
    deployment: Deployment, spark_engine: SparkEngine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalAthena]:
    from lakeline.runtimes.deployed.local_aws.athena import install_local_athena

    athena = install_local_athena(
        spark_engine, tmp_path_factory.mktemp("spark-athena-mirror"), database_prefix="spark_rehearsal_athena__"
    )
    yield athena
    athena.stop()


@pytest.fixture(scope="package")
def local_glue(
    deployment: Deployment, spark_engine: SparkEngine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalGlue]:
    """The endpoint's Glue runs each job run: the job's script from the assembly's asset, on the session's
    Spark, as the job's role."""
    from lakeline.runtimes.deployed.local_aws.glue import install_local_glue

    glue = install_local_glue(
        deployment,
        spark_engine.session,
        tmp_path_factory.mktemp("glue-mirror"),
        role_credentials=lambda role, session: iam.role_credentials(
            deployment.account, deployment.region, role, session
        ),
    )
    yield glue
    glue.stop()
    from lakeline.runtimes.deployed.local_aws.executions import TASK_SERVERS

    assert not TASK_SERVERS, "the local Glue left its task server installed"


@pytest.fixture(scope="package")
def executions(
    deployment: Deployment, functions: FunctionHost, local_athena: LocalAthena, local_glue: LocalGlue
) -> Iterator[ExecutionHost]:
    host = execution_host(deployment, functions)
    host.install()
    yield host
    host.uninstall()
