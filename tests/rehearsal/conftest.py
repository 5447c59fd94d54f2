"""The rehearsal tier: the CDK app is synthesized once per session and its cloud assembly stood up on a
moto server in this process (``lakeline.local.rehearsal.deploy``)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeline.local.rehearsal.deploy import Deployment, deploy
from lakeline.local.rehearsal.functions import FunctionHost


@pytest.fixture(scope="session")
def assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``cdk synth`` of the app as users deploy it (athena engine), into a cloud assembly folder."""
    import aws_cdk as cdk

    from stacks.app import build_app

    outdir = tmp_path_factory.mktemp("cdk.out")
    app = cdk.App(outdir=str(outdir), context={"environment": "dev", "engine": "athena"})
    build_app(app)
    app.synth()
    return outdir


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def deployment(assembly: Path) -> Iterator[Deployment]:
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield deploy(assembly, f"http://127.0.0.1:{port}")
    finally:
        server.stop()


@pytest.fixture(scope="session")
def functions(deployment: Deployment, assembly: Path) -> FunctionHost:
    """The deployed functions, run from their bundled assets whenever moto invokes one."""
    host = FunctionHost(assembly, deployment.endpoint, deployment.region, deployment.client("lambda"))
    host.install()
    return host
