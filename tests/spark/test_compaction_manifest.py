"""A compaction on embedded Spark reads exactly the files its partition loaded, through the run's manifest
(#39): not a file the door refused, nor one still waiting in the raw folder, though both sit in the
partition's raw folder; Parquet and CSV. The SQL names no file."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeline.commits import PartitionCommits
from lakeline.engines.spark import SparkEngine
from lakeline.project.catalog import ensure_tables
from lakeline.project.workspace import Workspace
from lakeline.runtimes.embedded.sample import write_single_parquet
from lakeline.storage import MANIFEST_OBJECT, manifest_prefix
from stage_a.contract import ContractViolation
from stage_a.keys import parse_raw_key
from tests.spark.test_partition_commits import DAY, StageA, stage_a_driver

pytestmark = pytest.mark.spark


def put(a: StageA, name: str, first: int, rows: int, file_format: str, *, bad: bool = False) -> str:
    """A raw file of ``rows`` orders from ``first`` (``bad``: an order id that is not a number)."""
    key = f"eng/sales/orders/date={DAY}/{name}.{file_format}"
    path = a.workspace.raw_dir / key
    path.parent.mkdir(parents=True, exist_ok=True)
    if file_format == "csv":
        lines = ["order_id,amount", *(f"{n},{n * 1.5}" for n in range(first, first + rows))]
        if bad:
            lines.append("not-a-number,1.0")
        path.write_text("\n".join(lines) + "\n")
    else:
        identifier = "CAST(id AS STRING)" if bad else "id"
        frame = a.engine.session.range(first, first + rows).selectExpr(
            f"{identifier} AS order_id", "CAST(id * 1.5 AS DOUBLE) AS amount"
        )
        write_single_parquet(frame, path)
    return key


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace.at(tmp_path / "ws")


@pytest.mark.parametrize("file_format", ["parquet", "csv"])
def test_a_compaction_reads_the_loaded_files_through_its_manifest_and_nothing_else(
    spark_engine: SparkEngine, workspace: Workspace, commits: PartitionCommits, file_format: str
) -> None:
    a = stage_a_driver(spark_engine, workspace, commits)
    first = put(a, "f1", 0, 100, file_format)
    ensure_tables(a.engine, parse_raw_key(first), a.workspace.raw_dir / first, a.settings)
    a.complete(a.arrive(first))
    a.complete(a.arrive(put(a, "f2", 100, 100, file_format)))
    assert (a.rows(), a.distinct_ids()) == (200, 200)
    refused = put(a, "refused", 1_000, 50, file_format, bad=True)
    with pytest.raises(ContractViolation):
        a.arrive(refused)
    put(a, "waiting", 2_000, 70, file_format)  # in the raw folder; its arrival has not come yet

    resent = a.arrive(put(a, "f1", 0, 30, file_format))  # new content for a loaded file: a compaction
    assert resent is not None and resent.mode == "compact" and resent.source is not None
    assert "$path" not in resent.ctas and "f2" not in resent.ctas, "the SQL names no file"
    manifest = Path((resent.source.manifest + MANIFEST_OBJECT).removeprefix("file://"))
    listed = [Path(line).name for line in manifest.read_text().splitlines()]
    assert listed == [f"f1.{file_format}", f"f2.{file_format}"]
    a.complete(resent)
    # f1's 30 new rows and f2's 100: nothing of the refused or the waiting file.
    assert (a.rows(), a.distinct_ids()) == (130, 130)
    database = a.settings.stage_database("eng", "sales")
    assert spark_engine.execute(f"SELECT max(order_id) FROM {database}.orders").rows[0][0] == 199
    assert not spark_engine.table_exists(database, resent.source.table), "the manifest's table is dropped"
    assert manifest.exists(), "the manifest stays with the run's prefix until the sweep"
    assert manifest_prefix(resent.target_location).startswith(resent.stage_partition_root)
