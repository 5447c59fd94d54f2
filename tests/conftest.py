"""Fixtures shared by every tier.

One SparkSession serves the whole test session (starting one costs seconds and only one can exist per
process); its Hive metastore lives in a session-wide temporary workspace. Tests that use it create
their own uniquely named databases or tables, so they do not see each other's data. Under pytest-xdist
(``make pytest``: ``-n 2 --dist loadscope``) a session is one worker process: each worker that runs a Spark
test starts its own SparkSession, in its own workspace (pytest gives each worker its own temporary folder).

Which tests share a worker (``pytest_xdist_make_scheduler`` below): each module is one unit, so its
module-scoped fixtures are built once; the rehearsal tier is one unit, since its package-scoped deployments
must not be stood up twice, nor the two engines' deployments at once in one process
(``tests/rehearsal/spark_engine/conftest.py``); each test of a module in ``EACH_TEST_A_UNIT`` is a unit;
the handler and infrastructure tiers are one unit, handlers first, since
``tests/infrastructure/test_grants.py`` checks the AWS calls the handler tests recorded in its own process
(and the infrastructure modules share one synth per engine).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness.aws_calls import RECORDER, CallRecorder

if TYPE_CHECKING:
    from xdist.remote import Producer
    from xdist.scheduler import LoadScopeScheduling

    from lakeline.commits import PartitionCommits
    from lakeline.engines.spark import SparkEngine

TESTS = Path(__file__).resolve().parent
GRANTS = TESTS / "infrastructure" / "test_grants.py"
AWS_CALLS_UNIT = "tests/handlers+infrastructure"
# Modules whose tests share no module-scoped fixture, each test its own unit: the generated project's two runtimes
# (430 s and 671 s in one measured e2e run) run on both workers at once instead of one after the other.
EACH_TEST_A_UNIT = frozenset({"tests/e2e/test_generated_project.py"})
HANDLER_TESTS_SELECTED = pytest.StashKey[set[str]]()
HANDLER_TESTS_RAN = pytest.StashKey[set[str]]()

# moto and boto3 must never reach a real account from the tests.
# An xdist worker starts with COLUMNS=80 in its environment, which a console made at import keeps as its
# width: commands would print as on an 80-column terminal there and as in a pipe in one process.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_SECURITY_TOKEN", "testing")
os.environ.setdefault("AWS_SESSION_TOKEN", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")


class Clock:
    """A clock a test moves by hand (leases, grace periods)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def commits(clock: Clock) -> Iterator[PartitionCommits]:
    """The partition-commit protocol over a pipeline-state table on moto; leases last 600 s of ``clock``."""
    import boto3
    from moto import mock_aws

    from lakeline.commits import PartitionCommits
    from lakeline.dependencies.tables import DependencyTableNames, create_dependency_tables
    from lakeline.storage import SchemeObjectStore

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        names = DependencyTableNames()
        create_dependency_tables(client, names)
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="stage")  # the tests' partitions are under s3://stage/
        lists = SchemeObjectStore(s3)
        yield PartitionCommits(client, names.pipeline_state, lease_seconds=600, clock=clock, lists=lists)


@pytest.fixture(scope="session")
def spark_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spark-workspace")


@pytest.fixture(scope="session")
def spark_engine(spark_workspace: Path) -> Iterator[SparkEngine]:
    # One per test session, so one per xdist worker: two JVMs of 2 GB each fit the machine's memory.
    from lakeline.catalog_locations import set_local_catalog
    from lakeline.engines.spark import SparkEngine

    # The tests' tables are small: the quick-start JVM, as a small project's commands get.
    engine = SparkEngine.local(
        spark_workspace, master="local[2]", shuffle_partitions=4, driver_memory="2g", quick_start=True
    )
    set_local_catalog(engine)  # as the embedded runtime's ``open_engine`` does
    yield engine
    set_local_catalog(None)
    engine.stop()


@pytest.fixture(autouse=True)
def valid_openlineage_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every OpenLineage event Lakeline makes in any test is checked against the official JSON schemas
    (``tests/openlineage_schema.py``): events pass through ``producer.owned`` where they are made."""
    from openlineage.client.event_v2 import RunEvent

    from lakeline.glue_scanner import events as glue_events
    from lakeline.lineage.openlineage import events as openlineage_events
    from lakeline.lineage.openlineage.producer import owned
    from tests.openlineage_schema import validate_event

    def owned_and_valid(event: RunEvent) -> RunEvent:
        made = owned(event)
        validate_event(openlineage_events.event_to_dict(made))
        return made

    for module in (openlineage_events, glue_events):
        monkeypatch.setattr(module, "owned", owned_and_valid)


@pytest.fixture(autouse=True)
def fresh_raw_objects() -> None:
    """Each test's moto mock gets its own clients in ``harness.raw_objects``."""
    from harness import raw_objects

    raw_objects.forget()


@pytest.fixture(scope="session", autouse=True)
def aws_calls() -> Iterator[CallRecorder]:
    """Every AWS call the deployed functions' code makes in this session, by function (``harness.aws_calls``);
    ``tests/infrastructure/test_grants.py`` checks them against the synthesized roles."""
    with RECORDER.installed() as recorder:
        yield recorder


def _tier(item: pytest.Item) -> str | None:
    path = Path(item.path)
    return path.relative_to(TESTS).parts[0] if path.is_relative_to(TESTS) else None


def _unit(nodeid: str) -> str:
    """The work unit the test ``nodeid`` belongs to under xdist (see the module's docstring)."""
    path = nodeid.split("::")[0]
    if path.startswith(("tests/handlers/", "tests/infrastructure/")):
        return AWS_CALLS_UNIT
    if path.startswith("tests/rehearsal/"):
        return "tests/rehearsal"
    return nodeid if path in EACH_TEST_A_UNIT else path


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before xdist's own; optional: xdist may be disabled
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LoadScopeScheduling | None:
    """``--dist loadscope`` with this suite's units (``_unit``) for scopes. xdist's ``loadgroup`` would do it
    from marks, but with pytest 9.2 it silently stops grouping (pytest-xdist#1386: it renames node ids)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SuiteUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    # Units in collection order, not by test count: the long e2e modules are collected first and so start
    # first, instead of last (the biggest unit by count, the many-test unit modules, are quick).
    config.option.loadscopereorder = False
    return SuiteUnits(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The grants tests move after the last handler test, whatever order the paths were given in."""
    grants = [item for item in items if Path(item.path) == GRANTS]
    handlers = [index for index, item in enumerate(items) if _tier(item) == "handlers"]
    if grants and handlers and items.index(grants[0]) < handlers[-1]:
        rest = [item for item in items if Path(item.path) != GRANTS]
        last = max(index for index, item in enumerate(rest) if _tier(item) == "handlers")
        items[:] = [*rest[: last + 1], *grants, *rest[last + 1 :]]


@pytest.hookimpl(trylast=True)  # after deselection (-k, -m)
def pytest_collection_finish(session: pytest.Session) -> None:
    session.config.stash[HANDLER_TESTS_SELECTED] = {item.nodeid for item in session.items if _tier(item) == "handlers"}
    session.config.stash[HANDLER_TESTS_RAN] = set()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> None:
    if _tier(item) == "handlers":
        item.config.stash[HANDLER_TESTS_RAN].add(item.nodeid)


@pytest.fixture(autouse=True)
def _grants_see_every_handler_test(request: pytest.FixtureRequest) -> None:
    """When this session selected handler tests, the grants tests run after all of them, in this process
    (an xdist worker records only the calls of the tests it ran): otherwise they would check a part of
    the calls, or skip, and say nothing."""
    if Path(request.node.path) != GRANTS:
        return
    selected = request.config.stash.get(HANDLER_TESTS_SELECTED, set())
    missing = selected - request.config.stash.get(HANDLER_TESTS_RAN, set())
    assert not missing, (
        f"{len(missing)} of the {len(selected)} selected handler tests did not run before the grants check in this "
        f"process (e.g. {sorted(missing)[0]}): with xdist, run with --dist loadscope (the {AWS_CALLS_UNIT!r} unit)"
    )
