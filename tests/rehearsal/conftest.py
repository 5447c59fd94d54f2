"""The rehearsal tier: the CDK app is synthesized once per session and its cloud assembly stood up on a
moto server in this process (``lakeline.local.rehearsal.deploy``)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakeline.local.rehearsal.deploy import Deployment, deploy


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
def lambda_invocations() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Every function invocation moto makes (event source mappings, targets), recorded instead of run in
    Docker: where the rehearsal's runner of the bundled assets will go."""
    import json

    import moto.awslambda.models as lambda_models

    calls: list[tuple[str, dict[str, Any]]] = []
    original = lambda_models.LambdaFunction.invoke

    def record(self: Any, body: Any, request_headers: Any, response_headers: Any) -> bytes:
        calls.append((self.function_name, json.loads(body) if body else {}))
        return b"null"

    lambda_models.LambdaFunction.invoke = record  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        lambda_models.LambdaFunction.invoke = original  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def deployment(assembly: Path, lambda_invocations: list[Any]) -> Iterator[Deployment]:
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield deploy(assembly, f"http://127.0.0.1:{port}")
    finally:
        server.stop()
