"""Fixtures shared by every tier.

One SparkSession serves the whole test session (starting one costs seconds and only one can exist per
process); its Hive metastore lives in a session-wide temporary workspace. Tests that use it create
their own uniquely named databases or tables, so they do not see each other's data.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness.aws_calls import RECORDER, CallRecorder

if TYPE_CHECKING:
    from lakeline.commits import PartitionCommits
    from lakeline.engines.spark import SparkEngine

# moto and boto3 must never reach a real account from the tests.
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

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        names = DependencyTableNames()
        create_dependency_tables(client, names)
        yield PartitionCommits(client, names.pipeline_state, lease_seconds=600, clock=clock)


@pytest.fixture(scope="session")
def spark_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spark-workspace")


@pytest.fixture(scope="session")
def spark_engine(spark_workspace: Path) -> Iterator[SparkEngine]:
    from lakeline.catalog_locations import set_local_catalog
    from lakeline.engines.spark import SparkEngine

    engine = SparkEngine.local(spark_workspace, master="local[2]", shuffle_partitions=4, driver_memory="2g")
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
