"""A local Glue endpoint for the ``-c engine=spark`` deployment: moto's Glue API, with each job run run on
the session's Spark, as AWS Glue for Spark runs it (#20).

moto's Glue records a job run and answers SUCCEEDED without running anything. ``install_local_glue``
makes the moto server of this process run every ``StartJobRun`` of a deployed job, and serves the state
machines' ``arn:aws:states:::glue:startJobRun.sync`` tasks as Step Functions does (``executions.
TASK_SERVERS``): ``StartJobRun`` with the task's parameters, signed as the machine's role (a missing
grant fails as in AWS), then ``GetJobRun`` until the run ends; the task's result is the ``JobRun``; a run
that did not succeed is ``States.TaskFailed`` with the ``JobRun`` as its cause, and a refused start is
``Glue.<code>`` (``Glue.ConcurrentRunsExceededException`` past the job's ``MaxConcurrentRuns``, which the
definitions retry).

A run does what Glue does with the job's definition, as CloudFormation created it from the template:
- Arguments: the job's ``DefaultArguments`` with the run's ``Arguments`` over them (moto merges them as
  Glue does), passed to the script as Glue passes them (``script --JOB_ID … --JOB_RUN_ID … --JOB_NAME …
  --key value …``).
- Code: the script is the object ``Command.ScriptLocation`` names and the library the zips
  ``--extra-py-files`` name, both read from the endpoint's S3 as the job's role (the assets ``cdk
  deploy`` uploaded from the cloud assembly, not the repository's files). The script runs as
  ``__main__``; the library's top-level packages are imported from its zip for the run (this process's
  copies are set aside meanwhile, and put back after), ``awsglue`` is a stand-in (``GlueContext`` whose
  ``spark_session`` is the session this endpoint was given, ``getResolvedOptions``), and a third-party
  package imported afresh must be one Glue provides (``GLUE_PROVIDED``) or one of
  ``--additional-python-modules``, which must be installed here at a version its requirement allows.
- Credentials: the job's role's, for every AWS SDK client the script makes with the default
  resolution (the environment variables Glue's sessions read, the rehearsal's endpoint as
  ``AWS_ENDPOINT_URL``).
- Catalog and storage: the Glue Data Catalog is the job's metastore, so Spark's databases are Glue's own
  names (no prefix; the tests' databases must not be used by other tiers of the same Spark session).
  Before the run, each Glue database the run's arguments name is made in Spark's metastore with its
  tables as Glue has them (``athena_catalog.CatalogSync``'s sync, with ``s3://`` locations kept), and the objects
  of the buckets those tables and the arguments name are brought into a local mirror; ``s3://`` and
  ``s3a://`` are Hadoop's view file system over the mirror, one mount per bucket, so the job's SQL runs
  unchanged. After the run (also a failed one: what ran is done) what it changed in those databases is
  written back to Glue, and what it wrote and removed in the mirror to S3.

Gaps, said plainly (the first three pinned by ``tests/rehearsal/spark_engine/test_glue_endpoint.py``'s
``test_gap_*``):
- One run at a time (Glue runs up to ``MaxConcurrentRuns`` at once); a queued run counts as running.
  ``BatchStopJobRun`` is not served (moto has none): a run goes on to its end.
- Spark's own reads and writes of S3 and the catalog are not authorized as the job's role (what the
  script does through the AWS SDK is); files Spark writes reach S3 when the run ends, so the script's
  ``ObjectStore`` sees S3 as it was plus its own changes, not Spark's files of the same run.
- Third-party packages this process had imported before the run are used as they are, and the library's
  modules are imported into this process, not a fresh interpreter; Python is this machine's 3.11.
- Glue databases the arguments do not name, a database the job creates, job bookmarks, the security
  configuration's encryption, worker types and timeouts of the job are not emulated.
- The filesystem arrangement reaches into the embedded Hive metastore's configurations by reflection
  (``_hadoop_configurations``): made for Spark 4's built-in Hive 2.3.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import io
import json
import logging
import os
import queue
import re
import sys
import sysconfig
import tempfile
import threading
import time
import types
import zipfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakeline.aws.distributions import AWS_SDK
from lakeline.engines.spark import SparkEngine
from lakeline.errors import LakelineError
from lakeline.runtimes.deployed.local_aws import executions
from lakeline.runtimes.deployed.local_aws.athena_catalog import CatalogSync, table_buckets
from lakeline.runtimes.deployed.local_aws.athena_mirror import S3Mirror
from lakeline.runtimes.deployed.local_aws.athena_statements import S3_URI, Rewriter, Statement, bucket_of
from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.iam import Credentials

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

JOB_TASK = "glue:startJobRun.sync"
STARTING, RUNNING, SUCCEEDED, FAILED = "STARTING", "RUNNING", "SUCCEEDED", "FAILED"
ENDED_RUN_STATES = frozenset({SUCCEEDED, FAILED, "STOPPED", "TIMEOUT", "ERROR"})
RUN_POLL_SECONDS = 0.05
S3_URIS = re.compile(r"s3a?://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](?:/[^\s\"'\\,;)]*)?")
VIEW_FILE_SYSTEM = "org.apache.hadoop.fs.viewfs.ViewFileSystemOverloadScheme"
GLUE_PROVIDED = frozenset(
    {
        "pyspark",
        "py4j",
        *AWS_SDK,
        "numpy",
        "pandas",
        "pyarrow",
        "pytz",
        "tzdata",
        "packaging",
        "setuptools",
        "typing-extensions",
    }
)
"""Distributions a Glue for Spark job can import without ``--additional-python-modules`` (a subset of
Glue 5.0's provided modules: the ones this rehearsal's Python has)."""


class LocalGlueError(LakelineError):
    """A job run the local endpoint cannot run as Glue would (its reason is the run's ``ErrorMessage``)."""


_run_class: Any = None


def _local_run_class() -> Any:
    """moto's ``FakeJobRun`` with a status of its own: moto's advances to SUCCEEDED whenever it is read."""
    global _run_class
    if _run_class is None:
        from moto.glue.models import FakeJobRun

        class LocalJobRun(FakeJobRun):
            local_state = STARTING
            error_message = ""
            glue_version = ""
            ended: float | None = None

            submitted = 0.0

            @property
            def status(self) -> str:
                return str(self.local_state)

            @status.setter
            def status(self, value: str) -> None:
                self.local_state = value

            def advance(self) -> None:
                return None

            def as_dict(self) -> dict[str, Any]:
                described: dict[str, Any] = super().as_dict()
                described["JobRunState"] = self.local_state
                described["GlueVersion"] = self.glue_version
                described["ExecutionTime"] = int((self.ended or time.time()) - self.submitted)
                if self.ended is None:
                    described.pop("CompletedOn", None)
                if self.error_message:
                    described["ErrorMessage"] = self.error_message
                return described

        _run_class = LocalJobRun
    return _run_class


_installed = threading.Lock()
_current: LocalGlue | None = None


def install_local_glue(
    deployment: Deployment,
    session: SparkSession,
    mirror: Path,
    *,
    role_credentials: Callable[[str, str], Credentials],
) -> LocalGlue:
    """Make the moto Glue of this process run the job runs started on it, on ``session``, and serve the
    Glue job tasks of state machines (see the module's docstring). ``mirror``: a folder for the local
    copies of S3 objects; ``role_credentials(role ARN, session name)``: what a job's role acts with.
    ``LocalGlue.stop`` gives moto's own behaviour back."""
    global _current
    with _installed:
        if _current is not None:
            raise LocalGlueError("a local Glue endpoint is installed already: stop it first")
        _current = LocalGlue(deployment, session, mirror, role_credentials)
        _current.install()
        return _current


class _CatalogBridge:
    """The local Athena's Glue ↔ Spark metastore sync and S3 ↔ mirror copies, for the job: Spark's
    databases are Glue's names and tables keep their ``s3://`` locations (the file system resolves them)."""

    def __init__(self, engine: SparkEngine, mirror: Path) -> None:
        mirror.mkdir(parents=True, exist_ok=True)
        self.names = _GlueNames(mirror, "")
        self.mirror = self.names.mirror
        self.catalog = CatalogSync(engine, self.names)
        self.store = S3Mirror(self.mirror)
        self.lock = threading.Lock()  # one job run at a time: the metastore, the mirror and their records


class _GlueNames(Rewriter):
    def local_uri(self, uri: str) -> str:
        return uri


class LocalGlue:
    """Runs the job runs started on moto's Glue, one at a time, on a worker thread."""

    def __init__(
        self,
        deployment: Deployment,
        session: SparkSession,
        mirror: Path,
        role_credentials: Callable[[str, str], Credentials],
    ) -> None:
        mirror.mkdir(parents=True, exist_ok=True)
        self.deployment = deployment
        self.session = session
        self.role_credentials = role_credentials
        self.bridge = _CatalogBridge(SparkEngine(session), mirror)
        self.mirror = self.bridge.mirror
        self.logs: dict[str, str] = {}
        """Each run's output (what the script printed, and the error it ended with), by run id."""
        self._queue: queue.Queue[tuple[Any, Any] | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._undo: list[Callable[[], None]] = []
        self._configured: list[Any] = []  # the Hadoop configurations given the keys below
        self._keys: set[str] = set()

    # -- installing

    def install(self) -> None:
        from moto.glue.models import FakeJob

        original = FakeJob.start_job_run
        endpoint = self

        def start_job_run(job: Any, *args: Any, **kwargs: Any) -> str:
            run_id = str(original(job, *args, **kwargs))
            (run,) = [r for r in job.job_runs if r.job_run_id == run_id]
            run.__class__ = _local_run_class()
            run.local_state = STARTING
            run.submitted = time.time()
            run.glue_version = job.glue_version or ""
            endpoint.submit(job, run)
            return run_id

        setattr(FakeJob, "start_job_run", start_job_run)  # noqa: B010
        self._undo.append(lambda: setattr(FakeJob, "start_job_run", original))
        executions.TASK_SERVERS[JOB_TASK] = serve_job_task

        def unserve() -> None:
            executions.TASK_SERVERS.pop(JOB_TASK, None)

        self._undo.append(unserve)
        self._undo.append(self._forget_file_system)

    def stop(self) -> None:
        """End the worker after the runs already started; moto's own Glue answers from then on."""
        global _current
        if self._worker is not None and self._worker.is_alive():
            self._queue.put(None)
            self._worker.join()
        while self._undo:
            self._undo.pop()()
        with _installed:
            if _current is self:
                _current = None

    def submit(self, job: Any, run: Any) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._work, name="local-glue", daemon=True)
            self._worker.start()
        self._queue.put((job, run))

    def _work(self) -> None:
        from moto.core.utils import utcnow

        while True:
            item = self._queue.get()
            if item is None:
                return
            job, run = item
            output = io.StringIO()
            run.local_state = RUNNING
            try:
                self.run(job, run, output)
                run.local_state = SUCCEEDED
            except BaseException as error:  # the worker outlives any run; the run reports why it failed
                run.error_message = _error_message(error)
                output.write(f"\n{run.error_message}\n")
                run.local_state = FAILED
                if not isinstance(error, Exception | SystemExit):
                    raise
            finally:
                run.ended = time.time()
                run.completed_on = utcnow()
                self.logs[run.job_run_id] = output.getvalue()

    # -- one run

    def run(self, job: Any, run: Any, output: io.StringIO) -> None:
        """Run the job's script for ``run`` (its arguments merged already), as its role."""
        from moto.glue.models import glue_backends
        from moto.s3.models import s3_backends

        account, region = self.deployment.account, self.deployment.region
        credentials = self.role_credentials(job.role, f"glue-{run.job_run_id}"[:64])
        s3 = self.deployment.client("s3", credentials=credentials)
        arguments: dict[str, str] = dict(run.arguments or {})
        script = _read(s3, job.command["ScriptLocation"])
        libraries = [_read(s3, uri) for uri in arguments.get("--extra-py-files", "").split(",") if uri.strip()]
        allowed = GLUE_PROVIDED | _additional_modules(arguments.get("--additional-python-modules", ""))
        glue = glue_backends[account][region]
        s3_backend = s3_backends[account]["aws"]
        argv = [job.command["ScriptLocation"], "--JOB_ID", f"j_{job.name}", "--JOB_RUN_ID", run.job_run_id]
        argv += ["--JOB_NAME", job.name]
        for key, value in arguments.items():
            argv += [key, value]
        began = time.monotonic()
        with self.bridge.lock:
            statement, buckets = self._bring_in(glue, s3_backend, " ".join(arguments.values()))
            ready = time.monotonic()
            try:
                with (
                    _library(libraries, allowed),
                    _glue_stand_in(self.session),
                    _aws_environment(credentials, self.deployment),
                    _arguments(argv),
                    contextlib.redirect_stdout(output),
                ):
                    code = compile(script, job.command["ScriptLocation"], "exec")
                    try:
                        exec(code, {"__name__": "__main__", "__file__": job.command["ScriptLocation"]})
                    except SystemExit as exited:  # sys.exit(0) ends a Glue job run successfully
                        if exited.code not in (0, None):
                            raise
            finally:
                ran = time.monotonic()
                self._write_out(glue, s3_backend, statement, buckets)
                logger.debug(
                    "local Glue %s: %.3fs catalog and mirror in, %.3fs the script, %.3fs back",
                    run.job_run_id,
                    ready - began,
                    ran - ready,
                    time.monotonic() - ran,
                )

    def _bring_in(self, glue: Any, s3: Any, named: str) -> tuple[Statement, set[str]]:
        """Spark's metastore made to hold the Glue databases ``named`` mentions as Glue has them (tables
        Glue does not have dropped), and the mirror their buckets' and the named buckets' objects."""
        words = set(re.findall(r"[A-Za-z0-9_]+", named.lower()))
        databases = {name for name in glue.databases if name in words}
        locations = S3_URIS.findall(named)
        tables: set[tuple[str, str]] = set()
        for database in databases:
            tables |= {(database, table) for table in glue.databases[database].tables}
            if self.session.catalog.databaseExists(database):
                tables |= {(database, t.name.lower()) for t in self.session.catalog.listTables(database)}
        statement = Statement("", tables, set(), databases, locations=locations)
        buckets = {bucket for bucket in (bucket_of(uri) for uri in locations) if bucket}
        for database, table in tables:
            entry = glue.databases[database].tables.get(table)
            if entry is not None:
                buckets |= table_buckets(entry)
        self._mount(list(s3.buckets))  # any s3:// path resolves, as on Glue (a missing bucket has no objects)
        for bucket in sorted(buckets):
            self.bridge.store.pull(s3, bucket)
        self.bridge.catalog.sync(glue, statement)
        return statement, buckets

    def _write_out(self, glue: Any, s3: Any, statement: Statement, buckets: set[str]) -> None:
        """Glue made to hold what the run changed in the databases it was given; S3 what it wrote."""
        changes: set[tuple[str, str]] = set()
        for database in statement.databases:
            changes |= {(database, table) for table in glue.databases[database].tables}
            if self.session.catalog.databaseExists(database):
                changes |= {(database, t.name.lower()) for t in self.session.catalog.listTables(database)}
        statement.changes = changes
        written = self.bridge.catalog.write_back(glue, statement, succeeded=True)
        for bucket in sorted(buckets | written):
            self.bridge.store.push(s3, bucket)

    # -- s3:// as the mirror

    def _mount(self, buckets: Iterable[str]) -> None:
        """``s3://`` and ``s3a://`` paths resolved by Hadoop's view file system, each bucket mounted on its
        folder of the mirror, in Spark's Hadoop configuration and in the embedded Hive metastore's (looked
        up for each run: the metastore's may be made anew)."""
        settings = {}
        for scheme in ("s3", "s3a"):
            settings[f"fs.{scheme}.impl"] = VIEW_FILE_SYSTEM
            settings[f"fs.{scheme}.impl.disable.cache"] = "true"
        for bucket in buckets:
            (self.mirror / bucket).mkdir(parents=True, exist_ok=True)
            settings[f"fs.viewfs.mounttable.{bucket}.linkFallback"] = (self.mirror / bucket).as_uri()
        configurations = _hadoop_configurations(self.session)
        for configuration in configurations:
            for key, value in settings.items():
                configuration.set(key, value)
        self._configured += configurations
        self._keys |= set(settings)

    def _forget_file_system(self) -> None:
        for configuration in self._configured:
            for key in self._keys:
                configuration.unset(key)
        self._configured.clear()
        self._keys.clear()


# --- the task: StartJobRun, then GetJobRun until the run ends ----------------------------------------


def serve_job_task(host: executions.TaskHost, parameters: dict[str, Any]) -> dict[str, Any]:
    """``arn:aws:states:::glue:startJobRun.sync``, as Step Functions runs it, signed as the machine's role."""
    from botocore.exceptions import ClientError

    glue = host.client("glue")
    try:
        run_id = glue.start_job_run(**parameters)["JobRunId"]
        while True:
            described = glue.get_job_run(JobName=parameters["JobName"], RunId=run_id)["JobRun"]
            if described["JobRunState"] in ENDED_RUN_STATES:
                break
            time.sleep(RUN_POLL_SECONDS)
    except ClientError as error:
        raise executions.TaskFailed(f"Glue.{error.response['Error']['Code']}", str(error)) from error
    result: dict[str, Any] = json.loads(json.dumps(described, default=str))
    if described["JobRunState"] != SUCCEEDED:
        raise executions.TaskFailed("States.TaskFailed", json.dumps(result))
    return result


# --- what the run's script finds around it ------------------------------------------------------------


def _read(s3: Any, uri: str) -> bytes:
    found = S3_URI.match(uri)
    if found is None:
        raise LocalGlueError(f"{uri} is not an s3:// location")
    try:
        return bytes(s3.get_object(Bucket=found.group("bucket"), Key=found.group("key"))["Body"].read())
    except s3.exceptions.ClientError as error:  # Glue cannot read it as the job's role either
        raise LocalGlueError(f"cannot read {uri} as the job's role: {error}") from error


def _additional_modules(requirements: str) -> frozenset[str]:
    """The distributions ``--additional-python-modules`` names, each installed here at an allowed version."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    names = set()
    for text in (part.strip() for part in requirements.split(",")):
        if not text:
            continue
        requirement = Requirement(text)
        try:
            installed = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError as error:
            raise LocalGlueError(f"--additional-python-modules {text}: not installed here") from error
        if not requirement.specifier.contains(installed, prereleases=True):
            raise LocalGlueError(f"--additional-python-modules {text}: {installed} is installed here")
        names.add(str(canonicalize_name(requirement.name)))
    return frozenset(names)


def _error_message(error: BaseException) -> str:
    if isinstance(error, SystemExit):
        return f"SystemExit: the script exited with {error.code}"
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


class _GlueImports(importlib.abc.MetaPathFinder):
    """Refuses a top-level package from this machine's site-packages that the job would not have."""

    def __init__(self, allowed: frozenset[str]) -> None:
        from packaging.utils import canonicalize_name

        self.allowed = allowed
        self.thread = threading.get_ident()  # the run's: other threads (the moto server's) import freely
        self.site = sysconfig.get_paths()["purelib"]
        self.owners = {
            name: {str(canonicalize_name(d)) for d in distributions}
            for name, distributions in importlib.metadata.packages_distributions().items()
        }

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if "." in name or threading.get_ident() != self.thread:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name)
        where = (spec and (spec.origin or next(iter(spec.submodule_search_locations or []), ""))) or ""
        if where.startswith(self.site) and not self.owners.get(name, set()) & self.allowed:
            raise ModuleNotFoundError(f"No module named {name!r} (not in Glue's runtime or the job's modules)")
        return None


@contextlib.contextmanager
def _library(libraries: list[bytes], allowed: frozenset[str]) -> Iterator[None]:
    """The library zips first on ``sys.path``, their top-level packages imported from them (this
    process's copies set aside until the run ends), and new third-party imports checked."""
    with tempfile.TemporaryDirectory(prefix="lakeline-glue-") as folder:
        paths: list[str] = []
        packages: set[str] = set()
        for index, content in enumerate(libraries):
            path = Path(folder) / f"library{index}.zip"
            path.write_bytes(content)
            paths.append(str(path))
            with zipfile.ZipFile(path) as archive:
                for name in archive.namelist():
                    first, _, rest = name.partition("/")
                    if rest == "__init__.py" or (not rest and first.endswith(".py")):
                        packages.add(first.removesuffix(".py"))
        ours = {name: module for name, module in sys.modules.items() if name.split(".")[0] in packages}
        for name in ours:
            del sys.modules[name]
        finder = _GlueImports(allowed)
        sys.path[:0] = paths
        sys.meta_path.insert(0, finder)
        importlib.invalidate_caches()
        try:
            yield
        finally:
            sys.meta_path.remove(finder)
            for path_text in paths:
                sys.path.remove(path_text)
                sys.path_importer_cache.pop(path_text, None)
            for name in [name for name in sys.modules if name.split(".")[0] in packages]:
                del sys.modules[name]
            sys.modules.update(ours)


@contextlib.contextmanager
def _glue_stand_in(session: SparkSession) -> Iterator[None]:
    """``awsglue.context.GlueContext`` (its ``spark_session`` is ``session``) and
    ``awsglue.utils.getResolvedOptions``, as the script imports them."""

    class GlueContext:
        def __init__(self, spark_context: Any) -> None:
            if spark_context is not session.sparkContext:
                raise LocalGlueError("GlueContext of another SparkContext than the job's")
            self.spark_session = session

    def get_resolved_options(args: list[str], options: list[str]) -> dict[str, str]:
        parser = argparse.ArgumentParser(prog=args[0] if args else "job", add_help=False)
        for option in ["JOB_NAME", *options]:
            parser.add_argument(f"--{option}", required=option != "JOB_NAME")
        known, _ = parser.parse_known_args(args[1:])
        return {key: value for key, value in vars(known).items() if value is not None}

    package = types.ModuleType("awsglue")
    context = types.ModuleType("awsglue.context")
    utils = types.ModuleType("awsglue.utils")
    context.GlueContext = GlueContext  # type: ignore[attr-defined]
    utils.getResolvedOptions = get_resolved_options  # type: ignore[attr-defined]
    package.context, package.utils = context, utils  # type: ignore[attr-defined]
    modules = {"awsglue": package, "awsglue.context": context, "awsglue.utils": utils}
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


@contextlib.contextmanager
def _aws_environment(credentials: Credentials, deployment: Deployment) -> Iterator[None]:
    """The job's role's credentials and the endpoint for SDK clients made with the default resolution
    (process-wide while the run lasts)."""
    import boto3

    variables = {
        **credentials.environment(),
        "AWS_DEFAULT_REGION": deployment.region,
        "AWS_REGION": deployment.region,
        "AWS_ENDPOINT_URL": deployment.endpoint,
    }
    if not credentials.session_token:
        variables["AWS_SESSION_TOKEN"] = ""
    saved = {name: os.environ.get(name) for name in [*variables, "AWS_SECURITY_TOKEN", "AWS_PROFILE"]}
    os.environ.update(variables)
    for name in ("AWS_SECURITY_TOKEN", "AWS_PROFILE"):
        os.environ.pop(name, None)
    boto3.DEFAULT_SESSION = None
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        boto3.DEFAULT_SESSION = None


@contextlib.contextmanager
def _arguments(argv: list[str]) -> Iterator[None]:
    saved = sys.argv
    sys.argv = argv
    try:
        yield
    finally:
        sys.argv = saved


def _field(instance: Any, name: str) -> Any:
    """A (private) field of a Java object, by reflection."""
    kind = instance.getClass()
    while kind is not None:
        for declared in kind.getDeclaredFields():
            if declared.getName() == name:
                declared.setAccessible(True)
                return declared.get(instance)
        kind = kind.getSuperclass()
    raise LocalGlueError(f"{instance.getClass().getName()} has no field {name}")


def _hadoop_configurations(session: SparkSession) -> list[Any]:
    """Every Hadoop configuration a path of the job's statements is resolved with: Spark's, and the
    embedded Hive metastore's (its client's, its handler's and its warehouse's, copies made when the
    session started)."""
    jvm: Any = session.sparkContext._jvm
    found = [session.sparkContext._jsc.hadoopConfiguration()]
    try:
        client = session._jsparkSession.sharedState().externalCatalog().unwrapped().client()
        found += [client.conf(), client.client().getConf()]
        store = client.msClient()
        if jvm.java.lang.reflect.Proxy.isProxyClass(store.getClass()):
            store = _field(jvm.java.lang.reflect.Proxy.getInvocationHandler(store), "base")
        retrying = jvm.java.lang.reflect.Proxy.getInvocationHandler(_field(store, "client"))
        handler = _field(retrying, "baseHandler")
        found += [_field(retrying, "origConf"), _field(retrying, "activeConf"), _field(handler, "hiveConf")]
        found.append(_field(_field(handler, "wh"), "conf"))
    except Exception as error:
        raise LocalGlueError(f"cannot reach the embedded Hive metastore's configuration: {error}") from error
    return found
