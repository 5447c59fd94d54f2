"""Dataset names per the OpenLineage naming conventions, one test per kind of dataset."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from openlineage.client.event_v2 import RunState

from lakeline.errors import ConfigError
from lakeline.lineage.columns.model import OutputColumn, StatementLineage, identity_of
from lakeline.lineage.openlineage.config import load_openlineage_settings
from lakeline.lineage.openlineage.events import StepRun, event_to_dict, run_event
from lakeline.lineage.openlineage.naming import (
    LOCAL_DATASET_NAMESPACE,
    DatasetNaming,
    athena_dataset_namespace,
    table_of,
)
from lakeline.lineage.openlineage.producer import PRODUCER

ATHENA = "awsathena://athena.eu-west-1.amazonaws.com"
GLUE = "arn:aws:glue:eu-west-1:123456789012"
RUN_ID = "01930000-0000-7000-8000-000000000001"
AT = datetime(2024, 1, 20, tzinfo=UTC)
NOWHERE = Path("/nonexistent-lakeline-test")  # no openlineage.yml is found from here


def _symlinks(naming: DatasetNaming, dataset: str) -> list[tuple[str, str, str]]:
    facet = naming.facets(dataset).get("symlinks")
    return [(i.namespace, i.name, i.type) for i in facet.identifiers] if facet else []


def test_a_deployed_catalog_table_is_named_as_athena_names_it_with_its_glue_symlink() -> None:
    naming = DatasetNaming(athena_dataset_namespace("eu-west-1"), GLUE)
    assert naming.of("sales.orders") == (ATHENA, "AwsDataCatalog.sales.orders")
    assert _symlinks(naming, "sales.orders") == [
        (ATHENA, "AwsDataCatalog.sales.orders", "TABLE"),  # the dotted name first: OpenMetadata reads it
        (GLUE, "table/sales/orders", "TABLE"),
    ]


def test_a_local_table_says_it_is_local_and_takes_the_deployed_identity_when_configured() -> None:
    default = load_openlineage_settings({}, cwd=NOWHERE, home=NOWHERE)
    assert default.naming.of("sales.orders") == (LOCAL_DATASET_NAMESPACE, "AwsDataCatalog.sales.orders")
    assert LOCAL_DATASET_NAMESPACE.startswith("lakeline-local://")
    assert _symlinks(default.naming, "sales.orders") == []
    deployed = load_openlineage_settings(
        {"OPENLINEAGE_DATASET_NAMESPACE": ATHENA, "OPENLINEAGE_GLUE_CATALOG": GLUE}, cwd=NOWHERE, home=NOWHERE
    )
    same = DatasetNaming(athena_dataset_namespace("eu-west-1"), GLUE)
    assert deployed.naming == same
    assert deployed.naming.of("sales.orders") == same.of("sales.orders")


def test_an_s3_location_is_bucket_and_key_without_symlinks() -> None:
    naming = DatasetNaming(ATHENA, GLUE)
    assert naming.of("s3://lake-curated/events/2024") == ("s3://lake-curated", "events/2024")
    assert naming.of("s3://lake-curated") == ("s3://lake-curated", "/")
    assert naming.facets("s3://lake-curated/events") == {}


def test_a_catalog_qualified_name_is_kept_and_read_back() -> None:
    naming = DatasetNaming(ATHENA)
    assert naming.name("AwsDataCatalog.sales.orders") == "AwsDataCatalog.sales.orders"
    assert table_of("AwsDataCatalog.sales.orders") == "sales.orders"
    assert table_of("sales.orders") == "sales.orders"


def test_a_malformed_glue_catalog_is_refused() -> None:
    with pytest.raises(ConfigError, match="arn:aws:glue:REGION:ACCOUNT"):
        DatasetNaming(ATHENA, "arn:aws:glue:eu-west-1:nope")
    with pytest.raises(ConfigError, match="arn:aws:glue:REGION:ACCOUNT"):
        load_openlineage_settings({"OPENLINEAGE_GLUE_CATALOG": "glue"}, cwd=NOWHERE, home=NOWHERE)


def test_events_name_inputs_outputs_and_column_inputs_the_same_way() -> None:
    statement = StatementLineage(
        "mart.flags", (OutputColumn("id", identity_of("sales.orders", "id")),), frozenset(), ("sales.orders",)
    )
    step = StepRun(
        job_name="j", run_id=RUN_ID, job_namespace="lakeline", dataset_namespace=ATHENA, glue_catalog=GLUE,
        statements=(statement,),
    )  # fmt: skip
    event = event_to_dict(run_event(step, RunState.COMPLETE, at=AT))
    (source,), (target,) = event["inputs"], event["outputs"]
    assert (source["namespace"], source["name"]) == (ATHENA, "AwsDataCatalog.sales.orders")
    assert (target["namespace"], target["name"]) == (ATHENA, "AwsDataCatalog.mart.flags")
    assert target["facets"]["symlinks"]["identifiers"][1]["name"] == "table/mart/flags"
    assert target["facets"]["symlinks"]["_producer"] == PRODUCER
    (field,) = target["facets"]["columnLineage"]["fields"]["id"]["inputFields"]
    assert (field["namespace"], field["name"], field["field"]) == (ATHENA, "AwsDataCatalog.sales.orders", "id")


def test_a_dumps_glue_catalog_needs_its_region_and_one_account() -> None:
    from lakeline.lineage.openlineage.naming import glue_catalog_of

    account = frozenset({"123456789012"})
    assert glue_catalog_of("eu-west-1", account) == "arn:aws:glue:eu-west-1:123456789012"
    assert glue_catalog_of("cn-north-1", account) == "arn:aws-cn:glue:cn-north-1:123456789012"
    assert glue_catalog_of("us-gov-west-1", account) == "arn:aws-us-gov:glue:us-gov-west-1:123456789012"
    assert glue_catalog_of(None, account) is None
    assert glue_catalog_of("eu-west-1", frozenset()) is None
    assert glue_catalog_of("eu-west-1", account | {"210987654321"}) is None  # no one catalog to name


def test_a_namespace_given_or_configured_wins_over_the_dumps_region() -> None:
    from lakeline.lineage.openlineage.naming import LOCAL_DATASET_NAMESPACE, glue_dump_naming

    account = frozenset({"123456789012"})
    assert glue_dump_naming("mine", None, region="eu-west-1", catalog_ids=account).namespace == "mine"
    given = glue_dump_naming(
        LOCAL_DATASET_NAMESPACE, None, region="eu-west-1", catalog_ids=account, namespace_given=True
    )
    assert given.namespace == LOCAL_DATASET_NAMESPACE
    configured = "arn:aws:glue:eu-west-1:210987654321"
    assert glue_dump_naming("mine", configured, region="eu-west-1", catalog_ids=account).glue_catalog == configured
