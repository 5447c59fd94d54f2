"""A compaction as deployed reads exactly the files its partition loaded, through the manifest the router
writes (#39): the state machine makes the table over it before the CTAS and drops it after; the local Athena
reads it as Athena does (the listed files in the raw table's format). A file the door refused and a file still
waiting in the raw folder sit in the same folder and are not read; Parquet and CSV."""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeline.engines.spark import SparkEngine
from lakeline.runtimes.deployed.local_aws.athena import LocalAthena
from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.executions import ExecutionHost
from lakeline.runtimes.deployed.local_aws.functions import FunctionHost
from lambdas.table_settings import TABLE_SETTINGS_FILE
from tests.rehearsal.support import bucket, create_table, executions_named, parked, query

pytestmark = pytest.mark.spark

COLUMNS = [("order_id", "bigint"), ("amount", "double")]
DAY = "20240401"


@contextlib.contextmanager
def no_arrivals(deployment: Deployment) -> Iterator[None]:
    """Objects put meanwhile send no event to queue A (the raw bucket's EventBridge rule has no target): they
    wait in the raw folder, as files whose arrival has not come yet."""
    events = deployment.client("events")
    (rule,) = [r["Name"] for r in events.list_rules()["Rules"] if "RawArrivals" in r["Name"]]
    targets = events.list_targets_by_rule(Rule=rule)["Targets"]
    events.remove_targets(Rule=rule, Ids=[target["Id"] for target in targets])
    try:
        yield
    finally:
        events.put_targets(Rule=rule, Targets=targets)


@contextlib.contextmanager
def compacting_past_two_files(functions: FunctionHost, tables: list[str]) -> Iterator[None]:
    """The stage A router plans ``tables`` with ``max_files`` 2 (a third file compacts), as a team's deployment
    configured so would (its table settings), instead of after 16 runs: the settings bundled in its code asset with
    these, in a file its ``TABLE_SETTINGS_FILE`` names; the router's environment restarts."""
    (router,) = [environment for name, environment in functions.environments.items() if "StageARouter" in name]
    bundled = json.loads((router.function.code / "lambdas" / TABLE_SETTINGS_FILE).read_text())
    bundled["tables"] = {**bundled["tables"], **{table: {"max_files": 2} for table in tables}}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / TABLE_SETTINGS_FILE
        path.write_text(json.dumps(bundled))
        variables = router.function.environment
        variables["TABLE_SETTINGS_FILE"] = str(path)
        router.stop()
        try:
            yield
        finally:
            variables.pop("TABLE_SETTINGS_FILE")
            router.stop()


def body(engine: SparkEngine, tmp: Path, file_format: str, first: int, rows: int, *, bad: bool = False) -> bytes:
    if file_format == "csv":
        lines = ["order_id,amount", *(f"{n},{n * 1.5}" for n in range(first, first + rows))]
        return ("\n".join([*lines, "NaN-id,1.0"] if bad else lines) + "\n").encode()
    identifier = "CAST(id AS STRING)" if bad else "id"
    frame = engine.session.range(first, first + rows).selectExpr(
        f"{identifier} AS order_id", "CAST(id * 1.5 AS DOUBLE) AS amount"
    )
    folder = tmp / f"{file_format}-{first}-{rows}-{bad}"
    frame.coalesce(1).write.parquet(str(folder))
    (written,) = folder.glob("part-*.parquet")
    return written.read_bytes()


@pytest.mark.parametrize("file_format", ["csv", "parquet"])
def test_a_compaction_reads_the_loaded_files_through_the_routers_manifest(
    deployment: Deployment,
    functions: FunctionHost,
    executions: ExecutionHost,
    local_athena: LocalAthena,
    spark_engine: SparkEngine,
    tmp_path: Path,
    file_format: str,
) -> None:
    table = f"orders_{file_format}"
    raw, stage = bucket(deployment, "raw"), bucket(deployment, "stage")
    create_table(
        deployment,
        f"retail_manifest_raw_dev.{table}",
        COLUMNS,
        f"s3://{raw}/retail/manifest/{table}/",
        csv=file_format == "csv",
    )
    create_table(deployment, f"retail_manifest_dev.{table}", COLUMNS, f"s3://{stage}/retail/manifest/{table}/")
    s3 = deployment.client("s3")
    folder = f"retail/manifest/{table}/date={DAY}/"

    def put(name: str, first: int, rows: int, *, bad: bool = False) -> str:
        content = body(spark_engine, tmp_path, file_format, first, rows, bad=bad)
        s3.put_object(Bucket=raw, Key=f"{folder}{name}", Body=content)
        return f"{folder}{name}"

    with compacting_past_two_files(functions, [f"retail_manifest_dev.{table}"]):
        put(f"f1.{file_format}", 0, 100)
        executions.wait()
        put(f"f2.{file_format}", 100, 100)
        executions.wait()
        refused = put(f"refused.{file_format}", 1_000, 50, bad=True)
        executions.wait()
        assert refused in parked(deployment)
        with no_arrivals(deployment):
            put(f"waiting.{file_format}", 2_000, 70)
        before = len(local_athena.executed)
        put(f"f3.{file_format}", 200, 30)  # a third file: the run compacts
        executions.wait()

    runs = executions_named(deployment, "StageAStateMachineArn", f"manifest-{table}")
    records = [executions.records[run["executionArn"]] for run in runs]
    failed = [str(r.cause)[-900:] for r in records if r.status != "SUCCEEDED"]
    assert not failed, "\n".join(failed)
    # SQS delivers at least once: a second delivery of an applied arrival starts a run that writes nothing.
    wrote = [run for run in runs if "RunPlanCtas" in executions.records[run["executionArn"]].states()]
    sfn = deployment.client("stepfunctions")
    inputs = [json.loads(sfn.describe_execution(executionArn=run["executionArn"])["input"])["plan"] for run in runs]
    assert len(wrote) == 3, "\n".join(f"{p['mode']} {p['lease']['pending']} {p['applied']}" for p in inputs)
    last = max(wrote, key=lambda run: run["startDate"])
    compaction = executions.records[last["executionArn"]].states()
    assert (
        compaction.index("RunPlanSourceTable") < compaction.index("RunPlanCtas") < compaction.index("RunPlanDropSource")
    )
    (ctas,) = [started for started, _ in local_athena.executed[before:] if started.startswith("CREATE TABLE")]
    assert "$path" not in ctas and f"f2.{file_format}" not in ctas, "the CTAS names no file"
    rows = query(
        deployment,
        f"SELECT count(*), count(DISTINCT order_id), max(order_id) FROM retail_manifest_dev.{table} "
        f"WHERE date = '{DAY}'",
    )
    # f1's, f2's and f3's rows: nothing of the refused or the waiting file, nothing twice.
    assert rows == [["230", "230", "229"]]
    # The compaction's manifest, beside its run's prefix (each run reads its files through one, #39): the
    # loaded files, by their S3 locations.
    planned = json.loads(sfn.describe_execution(executionArn=last["executionArn"])["input"])["plan"]
    manifest = planned["source"]["manifest"].removeprefix(f"s3://{stage}/") + "manifest"
    assert planned["mode"] == "compact" and manifest.startswith(folder)
    listed = s3.get_object(Bucket=stage, Key=manifest)["Body"].read().decode().splitlines()
    assert listed == [f"s3://{raw}/{folder}f{n}.{file_format}" for n in (1, 2, 3)]
