"""A workspace that moved (``lakeline.project.relocation``): every table and partition under an old root
points at the same place under the new one, in one pass, and nothing else moves."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from lakeline.engines.spark import SparkEngine
from lakeline.project.relocation import _inferred, mover, relocate, roots_file
from lakeline.project.workspace import Workspace
from lakeline.storage import local_root

_databases = itertools.count()


def test_tables_and_partitions_under_an_old_root_move_and_others_stay(
    spark_engine: SparkEngine, tmp_path: Path
) -> None:
    old, new, elsewhere = tmp_path / "old ws", tmp_path / "new ws", tmp_path / "elsewhere"
    database = f"moved{next(_databases)}"
    spark_engine.execute(f"CREATE DATABASE {database} LOCATION '{local_root(old / 'warehouse' / database)}'")
    spark_engine.execute(
        f"CREATE TABLE {database}.t (v string, day string) USING parquet PARTITIONED BY (day) "
        f"LOCATION '{local_root(old / 'stage' / 't')}'"
    )
    spark_engine.execute(f"CREATE TABLE {database}.other (v string) USING parquet LOCATION '{local_root(elsewhere)}'")
    for day in ("1", "2"):
        where = local_root(old / "stage" / "t" / f"day={day}" / "lakeline_run=x")
        spark_engine.execute(f"ALTER TABLE {database}.t ADD PARTITION (day = '{day}') LOCATION '{where}'")
    spark_engine.execute(
        f"ALTER TABLE {database}.t ADD PARTITION (day = '3') LOCATION '{local_root(elsewhere / 'day=3')}'"
    )

    relocated = spark_engine.relocate(mover([(local_root(old), local_root(new))]))

    assert (relocated.tables, relocated.partitions) == (1, 2)
    # The database moved too, or is reported as staying (Hive 2.3's client cannot move one).
    database_location = spark_engine.session.catalog.getDatabase(database).locationUri
    assert (str(new) in str(database_location)) != (database in relocated.stuck_databases)
    assert spark_engine.describe_table(database, "t").location == local_root(new / "stage" / "t")
    assert spark_engine.describe_table(database, "other").location == local_root(elsewhere)
    for day in ("1", "2"):
        expected = local_root(new / "stage" / "t" / f"day={day}" / "lakeline_run=x")
        assert spark_engine.partition_location(database, "t", {"day": day}) == expected
    assert spark_engine.partition_location(database, "t", {"day": "3"}) == local_root(elsewhere / "day=3")
    # Moving again finds nothing under the old root.
    again = spark_engine.relocate(mover([(local_root(old), local_root(new))]))
    assert (again.tables, again.partitions) == (0, 0)


def test_a_workspace_made_before_its_record_is_found_by_its_metastores_warehouse(
    spark_engine: SparkEngine, spark_workspace: Path, tmp_path: Path
) -> None:
    assert _inferred(spark_engine, Workspace(spark_workspace.resolve())) is None  # where it was made
    copied = Workspace(tmp_path / "copy" / ".lakeline", tmp_path / "copy" / "incoming")
    assert _inferred(spark_engine, copied) == (spark_workspace.resolve(), spark_workspace.resolve().parent / "incoming")


def test_the_pipeline_state_is_rewritten_and_the_new_place_recorded(spark_engine: SparkEngine, tmp_path: Path) -> None:
    old = Workspace(tmp_path / "a" / ".lakeline", tmp_path / "a" / "incoming")
    new = Workspace(tmp_path / "b" / ".lakeline", tmp_path / "b" / "incoming")
    roots_file(new).parent.mkdir(parents=True)
    new.pipeline_state_file.parent.mkdir(parents=True)
    roots_file(new).write_text(json.dumps({"workspace": str(old.root), "raw": str(old.raw_dir)}))
    state = [
        {"published": {"S": local_root(old.root / "stage" / "t" / "day=1" / "lakeline_run=x")}},
        {"retired": {"SS": [f"12.5 {local_root(old.root / 'stage' / 'x')}"]}, "other": {"S": "/a/.lakeline/"}},
    ]
    new.pipeline_state_file.write_text(json.dumps(state))
    said: list[str] = []

    relocate(spark_engine, new, new.pipeline_state_file, said.append)

    moved = json.loads(new.pipeline_state_file.read_text())
    assert moved[0]["published"]["S"] == local_root(new.root / "stage" / "t" / "day=1" / "lakeline_run=x")
    assert moved[1]["retired"]["SS"] == [f"12.5 {local_root(new.root / 'stage' / 'x')}"]
    assert moved[1]["other"] == {"S": "/a/.lakeline/"}
    (message,) = said
    assert f"{local_root(old.root)} → {local_root(new.root)}" in message
    assert json.loads(roots_file(new).read_text()) == {"workspace": str(new.root), "raw": str(new.raw_dir)}


def test_the_tests_session_runs_the_quick_start_jvm(spark_engine: SparkEngine) -> None:
    from lakeline.engines.spark import QUICK_START_JAVA_OPTIONS

    jvm = spark_engine.session.sparkContext._jvm
    assert jvm is not None
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert set(QUICK_START_JAVA_OPTIONS) <= set(arguments)
