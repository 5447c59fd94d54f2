"""Runs that end outside their Catch, as deployed (#39, "no partition stranded"): an operator stops a stage A
execution mid-run (``StopExecution``); Step Functions' status-change event reaches the status-change function by
its rule, which ends the run as the failure path does: the arrival it took parked with the reason, what waited
taken by a follow-up run, the lease free. And a partition whose arrivals wait behind a lease that expired with
nothing to end it is found by the scheduled sweep, whose follow-up run loads them.

Before: nothing ran on an abort; the lease stayed held 3 h, and the arrivals waiting behind it waited for a new file
that for a closed partition never comes."""

from __future__ import annotations

import pytest

from lakeline.commits import PartitionCommits, commit_key
from lakeline.partitions import new_run_token
from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.events import fire_schedules
from lakeline.runtimes.deployed.local_aws.executions import ExecutionHost
from lakeline.runtimes.deployed.local_aws.functions import FunctionHost
from tests.rehearsal.support import bucket, create_table, executions_named, output, parked, query

pytestmark = pytest.mark.spark

PARCELS = [("parcel_id", "bigint"), ("weight", "double")]
TABLE = "retail_stranded_dev.parcels"


@pytest.fixture(scope="module")
def parcels(deployment: Deployment, executions: ExecutionHost) -> None:
    """retail/stranded/parcels: a dataset of its own (the package's deployment is shared)."""
    raw = f"s3://{bucket(deployment, 'raw')}/retail/stranded/parcels/"
    create_table(deployment, "retail_stranded_raw_dev.parcels", PARCELS, raw, csv=True)
    create_table(deployment, TABLE, PARCELS, f"s3://{bucket(deployment, 'stage')}/retail/stranded/parcels/")
    executions.wait()


def arrive(deployment: Deployment, key: str, body: bytes) -> None:
    deployment.client("s3").put_object(Bucket=bucket(deployment, "raw"), Key=key, Body=body)


def commits(deployment: Deployment) -> PartitionCommits:
    return PartitionCommits(deployment.client("dynamodb"), output(deployment, "PipelineStateTable"))


def rows(deployment: Deployment, day: str) -> list[list[str]]:
    return query(deployment, f"SELECT parcel_id FROM {TABLE} WHERE date = '{day}' ORDER BY parcel_id")


def test_a_stage_a_execution_stopped_mid_run_parks_its_arrival_and_a_follow_up_takes_what_waited(
    deployment: Deployment, functions: FunctionHost, executions: ExecutionHost, parcels: None
) -> None:
    first, second = (f"retail/stranded/parcels/date=20240401/{name}.csv" for name in ("first", "second"))
    sfn = deployment.client("stepfunctions")
    with executions.held("RunPlanCtas") as reached:
        arrive(deployment, first, b"parcel_id,weight\n1,2.5\n")
        assert reached.wait(120), "the run never reached its CTAS"
        arrive(deployment, second, b"parcel_id,weight\n2,4.0\n")  # waits behind the run
        (running,) = [
            run
            for run in executions_named(deployment, "StageAStateMachineArn", "stranded-parcels")
            if run["status"] == "RUNNING"
        ]
        sfn.stop_execution(executionArn=running["executionArn"])
    executions.wait()
    stopped = executions.records[running["executionArn"]]
    assert stopped.status == "ABORTED" and "PostUpdateTask" not in stopped.states(), stopped.states()
    # Other tests' failed executions (their Catch ran) reach the function too: this one's, once.
    ended = [
        result
        for name, event, result in functions.invocations
        if "StrandedRunEnd" in name and event["detail"]["executionArn"] == running["executionArn"]
    ]
    assert [(r["status"], r["ended"], r["parked"]) for r in ended] == [("ABORTED", True, [first])], ended
    reason = parked(deployment)[first]
    assert reason.startswith("ctas failed: States.Aborted"), reason
    # The follow-up run took the arrival that waited: its rows are in, the stopped run's are not.
    assert rows(deployment, "20240401") == [["2"]]
    key = commit_key(TABLE, "date=20240401")
    state = commits(deployment).read(key)
    assert state.lease_owner is None and not state.pending and state.version == 1


def test_arrivals_behind_a_lease_that_expired_with_nothing_to_end_it_are_loaded_by_the_sweep(
    deployment: Deployment, executions: ExecutionHost, parcels: None
) -> None:
    key = commit_key(TABLE, "date=20240402")
    root = f"s3://{bucket(deployment, 'stage')}/retail/stranded/parcels/date=20240402/"
    dead = new_run_token()  # a run that died with nothing to end its lease
    store = commits(deployment)
    assert store.begin(key, dead, f"{root}lakeline_run={dead}/", root) is not None
    arrive(deployment, "retail/stranded/parcels/date=20240402/late.csv", b"parcel_id,weight\n3,1.0\n")
    executions.wait()
    assert store.read(key).pending, "the arrival waits behind the dead run's lease"
    fire_schedules(deployment.account, deployment.region, "SweepSchedule")
    executions.wait()
    assert rows(deployment, "20240402") == [], "a live lease is not the sweep's"
    deployment.client("dynamodb").update_item(  # the lease's hours pass
        TableName=output(deployment, "PipelineStateTable"),
        Key={"target_partition": {"S": key}},
        UpdateExpression="SET lease_expires = :past",
        ExpressionAttributeValues={":past": {"N": "1"}},
    )
    assert fire_schedules(deployment.account, deployment.region, "SweepSchedule")
    executions.wait()
    assert rows(deployment, "20240402") == [["3"]]
    state = store.read(key)
    assert state.lease_owner is None and not state.pending
