"""Routing against DynamoDB (moto): one Query per finished table, trigger modes any and all."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import boto3
import pytest
from moto import mock_aws
from pydantic import ValidationError

from lakeline.catalog_json import CatalogFile
from lakeline.dependencies.arrivals import ArrivalTracker
from lakeline.dependencies.model import parse_dependency_item
from lakeline.dependencies.resolve import resolve_steps, team_sql_reader
from lakeline.dependencies.store import DependencyStore, to_dynamodb
from lakeline.dependencies.sync import backfill
from lakeline.dependencies.tables import DependencyTableNames, create_dependency_tables
from lakeline.engines.base import Column, TableSchema
from lakeline.errors import ConfigError
from lakeline.lineage.openlineage.config import OpenLineageSettings
from lakeline.lineage.openlineage.events import event_to_dict
from lakeline.lineage.records.writer import LineageWriter
from stage_b.messages import LineageParents, StageBMessage
from stage_b.plan import StageBPlan
from stage_b.routing import route_finished_partition
from stage_lineage.events import stage_b_lifecycle
from stage_lineage.records import STAGE_B_COMPLETE, STEP_FAILED, record_stage_b, record_stage_b_failure
from tests.seed_items import seed_item

REPO = Path(__file__).parents[2]
SEED_ITEM = REPO / "tests" / "fixtures" / "dependencies" / "seed_item.json"
TABLES = DependencyTableNames("deps-routing", "deps-by-table-routing", "state-routing")
TARGET = "engineering_analytics_dev.destination_table"
CUSTOMERS = "engineering_mysql_dev.customers"
ORDERS = "engineering_mysql_dev.orders"
DAY = {"date": "20220120"}
V1, V2, V3 = (f"v{n}.2022012{n}t101500123456_1a2b3c4d5e" for n in (1, 2, 3))


@dataclass
class Aws:
    client: Any
    store: DependencyStore

    def tracker(self) -> ArrivalTracker:
        """A tracker on its own client, so a test can hook the calls of one arrival only."""
        return ArrivalTracker(boto3.client("dynamodb", region_name="us-east-1"), TABLES.pipeline_state)

    def define(self, *items: dict[str, Any]) -> None:
        self.store.put_items([parse_dependency_item(item) for item in items])
        assert not backfill(self.store).invalid

    def route(
        self, table: str, partition: dict[str, str], tracker: ArrivalTracker | None = None, run: str | None = None
    ) -> list[StageBMessage]:
        routing = route_finished_partition(table, partition, self.store, tracker or self.tracker(), run=run)
        assert routing.unrouted == []
        return routing.messages

    def state(self, target_partition: str) -> dict[str, Any]:
        item: dict[str, Any] = self.client.get_item(
            TableName=TABLES.pipeline_state, Key={"target_partition": {"S": target_partition}}
        ).get("Item", {})
        return item


@pytest.fixture
def aws() -> Iterator[Aws]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_dependency_tables(client, TABLES)
        yield Aws(client, DependencyStore(client, TABLES.dependencies, TABLES.by_table))


def needing_both(**changes: Any) -> dict[str, Any]:
    data = seed_item(triggerMode="all", **changes)
    data["dependencies"].append(dict(data["dependencies"][0], TableName=ORDERS, Usage="append"))
    return data


def test_seed_example_routes_and_resolves_end_to_end(aws: Aws) -> None:
    aws.define(seed_item())
    lineage = LineageParents(root_id="root-1", parent_id="stage-a-node-7")
    run = "20220120t101500123456_1a2b3c4d5e"
    [message] = route_finished_partition(
        CUSTOMERS, {"date": "20220120"}, aws.store, lineage=lineage, run=run, version=f"v2.{run}"
    ).messages
    assert message.model_dump() == {
        "target_dataset": TARGET,
        "partition": {"date": "20220115"},
        # the version travels, so the target's run names the input version it was triggered by (#43)
        "trigger": {"table": CUSTOMERS, "partition": {"date": "20220120"}, "run": run, "version": f"v2.{run}"},
        "usage": "overwrite",
        "lineage": {"root_id": "root-1", "parent_id": "stage-a-node-7", "table": None, "version": None},
        "path": [f"{CUSTOMERS}/date=20220120"],
        "also_lineage": [],
        "contribution": None,
    }
    # what stage B does with it: read the item itself, substitute from the destination partition
    item = aws.store.get_item(message.target_dataset)
    assert item is not None
    resolved = resolve_steps(item, message.partition, team_sql_reader(REPO / "athena_queries", "engineering"))
    assert "'20220114'" in resolved.steps[0].sql
    assert "'20220110'" in resolved.steps[0].sql


def test_any_mode_every_target_every_arrival(aws: Aws) -> None:
    aws.define(
        seed_item(),
        seed_item(dataset="engineering_analytics_dev.weekly", partitionColumn="dt", partitionPythonMask="%Y-%m-%d"),
    )
    for day in ("20220120", "20220120", "20220121"):  # a redelivered arrival routes again in mode any
        messages = aws.route(CUSTOMERS, {"region": "eu", "date": day})
        assert [(m.target_dataset, m.partition) for m in messages] == [
            (TARGET, {"date": "20220115"}),
            ("engineering_analytics_dev.weekly", {"dt": "2022-01-15"}),
        ]
        assert messages[0].trigger.partition == {"region": "eu", "date": day}
    assert aws.route("engineering_mysql_dev.unrelated", {"date": "20220120"}) == []
    assert aws.client.scan(TableName=TABLES.pipeline_state)["Count"] == 0  # mode any keeps no state


def test_b_to_b_chains_carry_the_path(aws: Aws) -> None:
    aws.define(
        seed_item(),
        seed_item(
            dataset="engineering_analytics_dev.monthly",
            dependencies=[
                {
                    "TableName": TARGET,
                    "FieldColumn": "date",
                    "Usage": "append",
                    "DateExpression": "%Y%m%d",
                    "relativedelta_attributes": {"day": 1},
                }
            ],
            partitionColumn="month",
            partitionPythonMask="%Y%m",
        ),
    )
    [first] = aws.route(CUSTOMERS, {"date": "20220120"})
    [second] = route_finished_partition(first.target_dataset, first.partition, aws.store, path=first.path).messages
    assert second.partition == {"month": "202201"}
    assert second.path == [f"{CUSTOMERS}/date=20220120", f"{TARGET}/date=20220115"]


def test_an_invalid_pair_fails_only_its_own_target(aws: Aws) -> None:
    aws.define(needing_both(), seed_item(dataset="engineering_analytics_dev.other"))
    broken = aws.store.edges_from(CUSTOMERS)[0].to_item()
    broken["dependency"]["relativedelta_attributes"] = {"weekday": "SA(0)"}
    broken["target_dataset"] = "engineering_analytics_dev.broken"
    aws.client.put_item(TableName=TABLES.by_table, Item=to_dynamodb(broken))
    # Issue 17: one target that could not be routed failed the routing of every target of the partition.
    routing = route_finished_partition(CUSTOMERS, {"date": "20220120"}, aws.store, aws.tracker())
    assert [message.target_dataset for message in routing.messages] == ["engineering_analytics_dev.other"]
    [unrouted] = routing.unrouted
    assert unrouted.target_dataset == "engineering_analytics_dev.broken"
    assert "occurrence must not be 0" in unrouted.reason
    assert aws.state(f"{TARGET}/date=20220115")["arrived_sources"]["SS"] == [CUSTOMERS]  # mode all went on
    aws.client.delete_item(
        TableName=TABLES.by_table,
        Key={"source_table": {"S": CUSTOMERS}, "target_dataset": {"S": "engineering_analytics_dev.broken"}},
    )
    # a partition without the FieldColumn fails every target, each with its reason, and records nothing
    routing = route_finished_partition(CUSTOMERS, {"day": "20220121"}, aws.store, aws.tracker())
    assert routing.messages == []
    assert [u.target_dataset for u in routing.unrouted] == [TARGET, "engineering_analytics_dev.other"]
    assert all("no partition column 'date'" in u.reason for u in routing.unrouted)
    assert aws.client.scan(TableName=TABLES.pipeline_state)["Count"] == 1


def test_all_mode_needs_a_state_table(aws: Aws) -> None:
    aws.define(needing_both())
    with pytest.raises(ConfigError, match="triggerMode 'all'"):
        route_finished_partition(CUSTOMERS, {"date": "20220120"}, aws.store)


def test_all_mode_triggers_when_every_source_has_arrived_and_then_on_every_later_arrival(aws: Aws) -> None:
    aws.define(needing_both())
    node = f"{TARGET}/date=20220115"
    assert aws.route(CUSTOMERS, {"date": "20220120"}) == []
    assert aws.state(node)["arrived_sources"]["SS"] == [CUSTOMERS]
    assert aws.route(CUSTOMERS, {"date": "20220120"}) == []  # redelivery of a non-completing arrival

    [message] = aws.route(ORDERS, {"date": "20220117"})  # Monday → the same Saturday 20220115
    assert (message.partition, message.usage, message.trigger.table) == ({"date": "20220115"}, "append", ORDERS)
    # what an append from the set replaces when the set triggers again: the set's rows, whoever triggers
    assert message.contribution == "all"
    assert aws.state(node)["completed_by"]["S"] == f"{ORDERS}/date=20220117"

    # the completing arrival redelivered (say its message was lost): it triggers again
    assert len(aws.route(ORDERS, {"date": "20220117"})) == 1
    # complete, a source used overwrite triggers on every later arrival, as mode any does (the target is
    # rebuilt with the late data): a late file re-running a partition already in (a new run), another day
    [late] = aws.route(CUSTOMERS, {"date": "20220120"}, run="20220125t000000000000_late000000")
    assert (late.trigger.run, late.usage) == ("20220125t000000000000_late000000", "overwrite")
    assert len(aws.route(CUSTOMERS, {"date": "20220121"})) == 1
    # so does a source used append: its run replaces the rows the set appended before (stage_b.plan)
    [appended] = aws.route(ORDERS, {"date": "20220118"})
    assert appended.contribution_key() == message.contribution_key() == late.contribution_key()
    assert aws.state(node)["completed_by"]["S"] == f"{ORDERS}/date=20220117"
    # the next week's partition is tracked on its own
    assert aws.route(CUSTOMERS, {"date": "20220122"}) == []
    assert len(aws.route(ORDERS, {"date": "20220124"})) == 1


def test_an_all_target_is_recorded_in_the_lineage_tree_of_every_source(aws: Aws) -> None:
    """Before: the archive linked an ``all`` target's run to the arrival that completed the set only."""
    aws.define(needing_both())
    customers = LineageParents(root_id="root-customers", parent_id="node-customers-v1")
    orders = LineageParents(root_id="root-orders", parent_id="node-orders")
    route = route_finished_partition
    assert route(CUSTOMERS, DAY, aws.store, aws.tracker(), lineage=customers, version=V1).messages == []
    newer = LineageParents(root_id="root-customers-2", parent_id="node-customers-v2")  # a second version
    assert route(CUSTOMERS, DAY, aws.store, aws.tracker(), lineage=newer, version=V2).messages == []
    [message] = route(ORDERS, {"date": "20220117"}, aws.store, aws.tracker(), lineage=orders, version=V1).messages
    # #43: beside where it sits in the records, the other source's latest arrival names its table and version
    assert (message.lineage, message.trigger.version) == (orders, V1)
    assert message.also_lineage == [newer.model_copy(update={"table": CUSTOMERS, "version": V2})]
    # One position and one version per source, however many times it arrives: the item does not grow.
    for _ in range(20):
        route(CUSTOMERS, DAY, aws.store, aws.tracker(), lineage=newer, version=V2)
    state = aws.state(f"{TARGET}/date=20220115")
    assert sorted(name for name in state if "@" in name) == [
        f"lineage@{CUSTOMERS}",
        f"lineage@{ORDERS}",
        f"version@{CUSTOMERS}",
        f"version@{ORDERS}",
    ]

    sqs = boto3.client("sqs", region_name="us-east-1")
    queue = sqs.create_queue(QueueName="lineage")["QueueUrl"]
    plan = cast(
        StageBPlan,
        SimpleNamespace(
            target_location="s3://analytics/t/date=20220115/run/",
            dataset=TARGET,
            lease=None,
            message_ids=(),
            run_token="20220120t101500123456_1a2b3c4d5e",
            writes=True,
        ),
    )
    record_stage_b(LineageWriter(sqs, queue), plan, message)
    bodies = [json.loads(m["Body"]) for m in sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]]
    assert sorted((b["root_id"], b["parent_id"], b["action_taken"]) for b in bodies) == [
        ("root-customers-2", "node-customers-v2", STAGE_B_COMPLETE),
        ("root-orders", "node-orders", STAGE_B_COMPLETE),
    ]


def test_the_tracker_keeps_each_sources_latest_version_which_a_redelivery_does_not_change(aws: Aws) -> None:
    """#43: an ``all`` target's run names the version it read of every source, not only of the completing one."""
    aws.define(needing_both())
    node = f"{TARGET}/date=20220115"

    def versions() -> dict[str, str]:
        state = aws.state(node).items()
        return {name: value["M"]["token"]["S"] for name, value in state if name.startswith("version@")}

    def route(table: str, partition: dict[str, str], version: str | None) -> list[StageBMessage]:
        return route_finished_partition(table, partition, aws.store, aws.tracker(), version=version).messages

    assert route(CUSTOMERS, DAY, V1) == []
    assert route(CUSTOMERS, DAY, V2) == []  # the partition's next version, before the set completes
    assert route(CUSTOMERS, DAY, V2) == []  # its arrival redelivered
    assert versions() == {f"version@{CUSTOMERS}": V2}
    # no lineage position was known (a run without lineage records): the version still travels
    [message] = route(ORDERS, {"date": "20220117"}, V1)
    assert message.also_lineage == [LineageParents(table=CUSTOMERS, version=V2)]
    # the completing arrival redelivered: the same message, the same versions
    assert route(ORDERS, {"date": "20220117"}, V1) == [message]
    # a re-routed partition (``lakeline reprocess``) names no version: the last known one is still what it holds
    [rerouted] = route(CUSTOMERS, DAY, None)
    assert rerouted.also_lineage == [LineageParents(table=ORDERS, version=V1)]
    assert versions() == {f"version@{CUSTOMERS}": V2, f"version@{ORDERS}": V1}
    # a later version replaces it, and the next run of the target reads it
    route(CUSTOMERS, DAY, V3)
    [late] = route(ORDERS, {"date": "20220117"}, V1)
    assert late.also_lineage == [LineageParents(table=CUSTOMERS, version=V3)]
    # an older version's arrival routed again after it (its routing retried late) still counts as an arrival,
    # but neither its version nor its place in the records replaces the newer one's
    older = LineageParents(root_id="root-customers-v1", parent_id="node-customers-v1")
    assert len(route_finished_partition(CUSTOMERS, DAY, aws.store, aws.tracker(), lineage=older, version=V1).messages)
    assert versions() == {f"version@{CUSTOMERS}": V3, f"version@{ORDERS}": V1}
    assert f"lineage@{CUSTOMERS}" not in aws.state(node)
    # another partition of the source mapping to the same target partition is its latest arrival, whatever
    # its number (versions of different partitions are not ordered)
    route(CUSTOMERS, {"date": "20220121"}, V1)
    assert versions() == {f"version@{CUSTOMERS}": V1, f"version@{ORDERS}": V1}
    # a source removed from the item is not read any more: its version is not named
    only_orders = needing_both()
    only_orders["dependencies"] = only_orders["dependencies"][1:]
    aws.define(only_orders)
    [alone] = route(ORDERS, {"date": "20220117"}, V1)
    assert alone.also_lineage == []


def test_messages_queued_before_the_versions_still_parse_and_a_bad_version_is_refused() -> None:
    body = {
        "target_dataset": TARGET,
        "partition": {"date": "20220115"},
        "trigger": {"table": ORDERS, "partition": {"date": "20220117"}},
        "usage": "append",
        "also_lineage": [{"root_id": "root-customers", "parent_id": "node-customers"}],
    }
    [source] = StageBMessage.model_validate(body).also_lineage
    assert (source.root_id, source.table, source.version) == ("root-customers", None, None)
    with pytest.raises(ValidationError, match="'v2' is not a partition version token"):
        StageBMessage.model_validate({**body, "also_lineage": [{"table": CUSTOMERS, "version": "v2"}]})
    with pytest.raises(ValidationError, match="'latest' is not a partition version token"):
        StageBMessage.model_validate({**body, "trigger": {**body["trigger"], "version": "latest"}})
    with pytest.raises(ValidationError, match="at most 50 items"):  # one entry per source, and a bound on them
        StageBMessage.model_validate({**body, "also_lineage": [{"table": CUSTOMERS, "version": V1}] * 51})


COLUMNS = (Column("customer_id", "bigint"), Column("amount", "bigint"))
CATALOG = CatalogFile(
    {
        tuple(name.split(".")): TableSchema(*name.split("."), COLUMNS, (Column("date", "string"),))  # type: ignore[misc]
        for name in (CUSTOMERS, ORDERS, TARGET)
    }
)
SETTINGS = OpenLineageSettings(namespace="lakeline-dev", dataset_namespace="awsathena://athena.us-east-1.amazonaws.com")


def test_the_events_of_an_all_targets_run_carry_the_version_of_every_source(aws: Aws) -> None:
    """#43: before, only the source whose arrival completed the set had a ``version`` facet."""
    aws.define(needing_both())
    route = route_finished_partition
    route(CUSTOMERS, DAY, aws.store, aws.tracker(), version=V2)
    [first] = route(ORDERS, {"date": "20220117"}, aws.store, aws.tracker(), version=V1).messages
    [late] = route(CUSTOMERS, {"date": "20220121"}, aws.store, aws.tracker(), version=V3).messages
    sql = (
        f"INSERT INTO {TARGET} SELECT c.customer_id, o.amount, '20220115' FROM {CUSTOMERS} c "
        f"JOIN {ORDERS} o ON c.customer_id = o.customer_id"
    )
    token = "20220125t000000000000_0123456789"

    def read(plan: SimpleNamespace, message: StageBMessage) -> dict[str, str | None]:
        lifecycle = stage_b_lifecycle(
            cast(StageBPlan, plan), message, catalog=CATALOG, settings=SETTINGS, engine="athena"
        )
        lifecycle.step_started(0)
        event = event_to_dict(lifecycle.step_finished(0))
        named = {dataset["name"].removeprefix("AwsDataCatalog."): dataset for dataset in event["inputs"]}
        assert set(named) == {CUSTOMERS, ORDERS}
        return {name: dataset["facets"].get("version", {}).get("datasetVersion") for name, dataset in named.items()}

    plan = SimpleNamespace(
        dataset=TARGET,
        resolved_sql=(sql,),
        steps=(SimpleNamespace(db="engineering_analytics_dev"),),
        lease=None,
        message_ids=(),
        run_token=token,
        writes=False,
        quality=None,
    )
    assert read(plan, first) == {ORDERS: V1, CUSTOMERS: V2}
    # a run under a lease that took both messages: a source's version known twice, the newest wins
    lease = {
        "key": f"{TARGET}/date=20220115",
        "owner": token,
        "location": "s3://analytics/t/run/",
        "version": 0,
        "pending": [m.model_dump_json() for m in (first, late)],
    }
    both = SimpleNamespace(
        **{**vars(plan), "lease": lease, "message_ids": (first.deduplication_id(), late.deduplication_id())}
    )
    assert read(both, first) == {ORDERS: V1, CUSTOMERS: V3}


def test_a_run_that_took_several_messages_is_recorded_in_the_tree_of_each(aws: Aws) -> None:
    """Before: a coalesced or follow-up run (the messages waiting while the partition's last run was in
    flight, #36) was recorded under the first message's tree only, so the other arrivals' trees stopped at
    their stage A version and never reached the target they were in."""
    aws.define(seed_item())
    first, second, third = (
        route_finished_partition(CUSTOMERS, {"date": day}, aws.store, aws.tracker(), lineage=lineage).messages[0]
        for day, lineage in (
            ("20220115", LineageParents(root_id="root-15", parent_id="node-15")),
            ("20220116", LineageParents(root_id="root-16", parent_id="node-16")),
            ("20220117", LineageParents(root_id="root-17", parent_id="node-17")),
        )
    )
    # The run took the first two; the third waits for the next run and is not this run's.
    lease = {
        "key": f"{TARGET}/date=20220115",
        "owner": "20220125t000000000000_run0000000",
        "location": "s3://analytics/t/run/",
        "version": 1,
        "pending": [m.model_dump_json() for m in (second, third, first)],
    }
    taken = (first.deduplication_id(), second.deduplication_id())
    plan = cast(
        StageBPlan,
        SimpleNamespace(
            target_location="s3://analytics/t/run/",
            dataset=TARGET,
            lease=lease,
            message_ids=taken,
            run_token="20220120t101500123456_1a2b3c4d5e",
            writes=True,
        ),
    )
    sqs = boto3.client("sqs", region_name="us-east-1")
    queue = sqs.create_queue(QueueName="lineage")["QueueUrl"]
    writer = LineageWriter(sqs, queue)
    parents = record_stage_b(writer, plan, first)
    record_stage_b_failure(writer, plan, first)
    bodies = [json.loads(m["Body"]) for m in sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]]
    assert sorted((b["root_id"], b["parent_id"], b["action_taken"]) for b in bodies) == [
        ("root-15", "node-15", STAGE_B_COMPLETE),
        ("root-15", "node-15", STEP_FAILED),
        ("root-16", "node-16", STAGE_B_COMPLETE),
        ("root-16", "node-16", STEP_FAILED),
    ]
    assert parents.root_id == "root-15"  # what the run triggers hangs under the first message's node


Interleave = Callable[[], None]


def _run_before(tracker: ArrivalTracker, conditional: bool, action: Interleave) -> None:
    """Run ``action`` once, right before this tracker's first (conditional or plain) UpdateItem."""
    done = False

    def hook(**kwargs: Any) -> None:
        nonlocal done
        is_conditional = "ConditionExpression" in (kwargs.get("params") or {})
        if not done and is_conditional == conditional:
            done = True
            action()

    tracker.client.meta.events.register("before-parameter-build.dynamodb.UpdateItem", hook)


def _run_after_first_update(tracker: ArrivalTracker, action: Interleave) -> None:
    done = False

    def hook(**kwargs: Any) -> None:
        nonlocal done
        if not done:
            done = True
            action()

    tracker.client.meta.events.register("after-call.dynamodb.UpdateItem", hook)


@pytest.mark.parametrize("moment", ["before the first write", "after the first write"])
def test_two_sources_finishing_together_trigger_exactly_once(aws: Aws, moment: str) -> None:
    aws.define(needing_both())
    customers_tracker, orders_tracker = aws.tracker(), aws.tracker()
    results: dict[str, list[StageBMessage]] = {}

    def orders_finish() -> None:
        results["orders"] = aws.route(ORDERS, {"date": "20220120"}, orders_tracker)

    if moment == "before the first write":
        _run_before(customers_tracker, False, orders_finish)
    else:
        _run_after_first_update(customers_tracker, orders_finish)
    results["customers"] = aws.route(CUSTOMERS, {"date": "20220120"}, customers_tracker)
    assert len(results["customers"]) + len(results["orders"]) == 1


def test_two_arrivals_both_seeing_the_set_complete_trigger_once(aws: Aws) -> None:
    aws.define(needing_both())
    assert aws.route(ORDERS, {"date": "20220117"}) == []
    first, second = aws.tracker(), aws.tracker()
    results: dict[str, list[StageBMessage]] = {}

    def second_finishes() -> None:
        results["second"] = aws.route(CUSTOMERS, {"date": "20220119"}, second)

    # both see {customers, orders} after their first write; the second wins the conditional write
    _run_before(first, True, second_finishes)
    results["first"] = aws.route(CUSTOMERS, {"date": "20220118"}, first)
    assert len(results["second"]) == 1
    assert results["first"] == []
    assert aws.state(f"{TARGET}/date=20220115")["completed_by"]["S"] == f"{CUSTOMERS}/date=20220119"
