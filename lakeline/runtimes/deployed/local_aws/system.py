"""The deployed system on one machine, stood up whole: ``cdk synth`` of the app, its cloud assembly
deployed on a moto server in this process (``deploy``), IAM enforced from then on (``iam``), the bundled
functions (``functions``), the local Athena on embedded Spark (``athena``) and the state machines' executions
(``executions``). ``lakeline demo`` runs on it; the rehearsal tier's fixtures stand up the same parts.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import logging
import os
import shutil
import socket
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakeline.errors import LakelineError
from lakeline.repository import REPOSITORY
from lakeline.runtimes.deployed.local_aws import iam
from lakeline.runtimes.deployed.local_aws.deploy import Deployment, deploy
from lakeline.runtimes.deployed.local_aws.executions import ExecutionHost
from lakeline.runtimes.deployed.local_aws.functions import FunctionHost
from lakeline.runtimes.deployed.local_aws.iam import Credentials

if TYPE_CHECKING:
    from lakeline.engines.spark import SparkEngine
    from lakeline.runtimes.deployed.local_aws.athena import LocalAthena


class SynthError(LakelineError):
    """The CDK app could not be synthesized (the ``cdk`` extra is missing, or the app refused its context)."""


def check_app() -> None:
    """Fail at once if this installation has no CDK app to synthesize (Lakeline installed from PyPI rather
    than from a clone of its repository, where the app lives beside the package)."""
    if not (REPOSITORY / "stacks" / "app.py").is_file() or not (REPOSITORY / "cdk.json").is_file():
        raise SynthError(
            f"the local deployment is the repository's CDK app synthesized and stood up here, and this installation "
            f"has none ({REPOSITORY} has no stacks/app.py and cdk.json): run from a clone of the repository "
            "(`make demo` sets it up), or run the pipeline's code in-process with --embedded"
        )


def synthesize(outdir: Path, context: dict[str, Any]) -> Path:
    """``cdk synth`` of the app as users deploy it, with ``context`` (as ``-c`` gives it), into the cloud
    assembly folder ``outdir``."""
    # The CDK's Node runtime warns at length when Node 20 runs it; the Makefile silences it the same way.
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    # The app lives beside the package in the repository (``cdk synth`` runs it from there: cdk.json's app).
    if (REPOSITORY / "stacks" / "app.py").is_file() and str(REPOSITORY) not in sys.path:
        sys.path.append(str(REPOSITORY))
    try:
        import aws_cdk as cdk

        from stacks.app import build_app
    except ImportError as error:
        raise SynthError(
            f"synthesizing the CDK app needs the repository's stacks and aws-cdk-lib ({error}): "
            "install Lakeline from a clone of its repository (`make demo` does: `pip install -e '.[local]'`), "
            "or run the pipeline's code in-process with --embedded"
        ) from error
    app = cdk.App(outdir=str(outdir), context=context)
    build_app(app)
    app.synth()
    return outdir


SYNTH_INPUTS = (
    "app.py",
    "cdk.json",
    "stacks",
    "lambdas",
    "lakeline",
    "stage_a",
    "stage_b",
    "stage_lineage",
    "stage_end",
    "athena_queries",
)
"""What ``cdk synth`` reads of the repository: the app, and the code and query files its assets bundle."""
SYNTHS_KEPT = 4  # assemblies kept in the cache (each a few MB): the last few apps and contexts used


def synth_cache() -> Path:
    """Where synthesized assemblies are kept by their inputs' digest (``LAKELINE_SYNTH_CACHE``, else the
    user's cache folder)."""
    configured = os.environ.get("LAKELINE_SYNTH_CACHE")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lakeline" / "synth"


def synth_digest(context: dict[str, Any], root: Path = REPOSITORY) -> str:
    """A digest of everything a synth of the app under ``root`` depends on: ``context``, the files it reads
    and bundles (``SYNTH_INPUTS``), the installed distributions' versions (aws-cdk-lib, and what the assets
    vendor) and Python's version."""
    digest = hashlib.sha256()
    digest.update(json.dumps(context, sort_keys=True, default=str).encode())
    digest.update(sys.version.encode())
    versions = sorted(f"{dist.metadata['Name']}=={dist.version}" for dist in importlib.metadata.distributions())
    digest.update("\n".join(versions).encode())
    for name in SYNTH_INPUTS:
        path = root / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else []
        for file in files:
            if "__pycache__" in file.parts or file.suffix == ".pyc":
                continue
            digest.update(file.relative_to(root).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


def synthesize_cached(outdir: Path, context: dict[str, Any], *, cache: Path | None = None) -> Path:
    """The cloud assembly ``synthesize`` gives for ``context`` in ``outdir`` (replaced): synthesized once per
    digest of its inputs (``synth_digest``) into ``cache`` and copied from there after, since a synth is
    deterministic (the same app, code and context give the same templates and assets)."""
    cache = cache or synth_cache()
    cache.mkdir(parents=True, exist_ok=True)
    cached = cache / synth_digest(context)
    # One process at a time in the cache (commands, test workers, other checkouts share it): the clean-up
    # below would otherwise delete an assembly another process is synthesizing or copying.
    with (cache / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (cached / "manifest.json").is_file():
            staged = Path(tempfile.mkdtemp(prefix=f"{cached.name}.", dir=cache))
            try:
                synthesize(staged, context)
                staged.rename(cached)  # whole or not at all
            finally:
                shutil.rmtree(staged, ignore_errors=True)
        os.utime(cached)  # most recently used: kept longest
        kept = sorted((p for p in cache.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
        for old in kept[:-SYNTHS_KEPT]:
            shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(outdir, ignore_errors=True)
        shutil.copytree(cached, outdir, copy_function=_link_or_copy)
    return outdir


def _link_or_copy(source: str, destination: str) -> None:
    """A hard link (the cached assembly is never written in place), else a copy (another file system)."""
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PortTaken(LakelineError):
    """The endpoint's fixed port is in use on 127.0.0.1."""


def check_port(port: int) -> None:
    """Fail, naming it, if ``port`` cannot be listened on: moto's server would wait for it forever."""
    with socket.socket() as probe:
        # As the server binds (address reuse on): a port left in TIME_WAIT is free, a listener's is not.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as error:
            raise PortTaken(
                f"port {port} is taken on 127.0.0.1 ({error.strerror}): another program listens on it; "
                "choose another --port, or leave --port out for a free one"
            ) from error


@dataclass
class DeployedSystem:
    deployment: Deployment
    functions: FunctionHost
    athena: LocalAthena
    executions: ExecutionHost


@contextmanager
def deployed(
    assembly: Path, *, credentials: Credentials | None = None, stable_names: bool = False, port: int | None = None
) -> Iterator[Deployment]:
    """The cloud assembly deployed on a new moto server in this process (``credentials``: whose account it
    is deployed in; by default moto's; ``stable_names``: see ``deploy``; ``port``: the server's, by default a
    free one), IAM enforced from then on and the operator signing the deployment's clients; the server
    stopped and IAM relaxed on leaving."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    # moto warns of each resource type its CloudFormation does not create: deploy.SKIPPED_TYPES says which.
    logging.getLogger("moto").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message="Tried to parse AWS::", category=UserWarning)
    if port is None:
        port = free_port()
    else:
        check_port(port)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        deployment = deploy(assembly, f"http://127.0.0.1:{port}", credentials=credentials, stable_names=stable_names)
        deployment.credentials = credentials or iam.operator_credentials(deployment.account)
        iam.enforce()  # from here on, every request is authorized as in AWS
        yield deployment
    finally:
        iam.relax()
        server.stop()


def function_host(deployment: Deployment, assembly: Path, logs: Path) -> FunctionHost:
    """The deployment's functions, each acting with its own role's credentials (not installed yet)."""
    return FunctionHost(
        assembly,
        deployment.endpoint,
        deployment.region,
        deployment.client("lambda"),
        account=deployment.account,
        logs=logs,
        role_credentials=lambda role, session: iam.role_credentials(
            deployment.account, deployment.region, role, session
        ),
    )


def execution_host(deployment: Deployment, functions: FunctionHost) -> ExecutionHost:
    """The deployment's executions, each machine's tasks acting with its role's credentials (not installed);
    at rest only when ``functions``' queues are."""
    return ExecutionHost(
        deployment,
        functions.pollers,
        role_credentials=lambda role: iam.role_credentials(deployment.account, deployment.region, role, "execution"),
    )


@contextmanager
def stood_up(
    assembly: Path,
    engine: SparkEngine | Callable[[], SparkEngine],
    work: Path,
    *,
    database_prefix: str = "athena_rehearsal__",
    stable_names: bool = False,
    port: int | None = None,
) -> Iterator[DeployedSystem]:
    """The cloud assembly at ``assembly`` deployed (``deployed``; ``stable_names``: see ``deploy``; ``port``: see
    ``deployed``), its functions, Athena on ``engine`` (its S3 mirror and the functions' logs under ``work``; a
    callable is asked for it once the stacks are up, so that it can start meanwhile) and its executions
    running; all of it stopped and uninstalled on leaving."""
    from lakeline.runtimes.deployed.local_aws.athena import install_local_athena

    with ExitStack() as stack:
        deployment = stack.enter_context(deployed(assembly, stable_names=stable_names, port=port))
        functions = function_host(deployment, assembly, work / "logs")
        functions.install()
        stack.callback(functions.uninstall)
        spark = engine() if callable(engine) else engine
        athena = install_local_athena(spark, work / "s3", database_prefix=database_prefix)
        stack.callback(athena.stop)
        executions = execution_host(deployment, functions)
        executions.install()
        stack.callback(executions.uninstall)
        yield DeployedSystem(deployment, functions, athena, executions)
