"""``lakeline run`` and ``lakeline watch`` over a user's own project folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.shop_project import ITEM, TABLES
from tests.e2e.in_process import invoke

LAKELINE = [sys.executable, "-m", "lakeline"]


def project(root: Path) -> Path:
    (root / "deps").mkdir(parents=True)
    (root / "deps" / "sales_by_store.json").write_text(json.dumps(ITEM))
    (root / "tables.sql").write_text(TABLES)
    (root / "lakeline.yml").write_text(
        "workspace: ws\nraw: incoming\nenvironment: dev\ndependencies: [deps]\ntables: [tables.sql]\n"
    )
    return root / "lakeline.yml"


def drop(root: Path, day: str, rows: list[tuple[str, float]]) -> None:
    folder = root / "incoming" / "shop" / "pos" / "sales" / f"day={day}"
    folder.mkdir(parents=True, exist_ok=True)
    body = "store,amount\n" + "".join(f"{store},{amount}\n" for store, amount in rows)
    (folder / "sales.csv").write_text(body)


def lakeline_run(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LAKELINE, "run", "--embedded", "--config", str(config)],
        cwd=config.parent,
        env={**os.environ, "COLUMNS": "400"},
        capture_output=True,
        text=True,
        timeout=600,
    )


def reprocess_sales(
    config: Path, first: str, last: str, *options: str, elsewhere: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``lakeline reprocess`` of the project's sales table over ``[first, last]``; ``elsewhere``: run in that
    folder, naming only the project's workspace."""
    table = ("--table", "shop_pos_dev.sales", "--from", first, "--to", last)
    project = ("--workspace", str(config.parent / "ws")) if elsewhere else ("--config", str(config))
    return subprocess.run(
        [*LAKELINE, "reprocess", *project, *table, *options],
        cwd=elsewhere or config.parent,
        env={**os.environ, "COLUMNS": "400"},
        capture_output=True,
        text=True,
        timeout=600,
    )


def totals(root: Path) -> dict[str, list[list[object]]]:
    return dict(json.loads((root / "ws" / "summary.json").read_text())["contents"])


WINDOW_ITEM = {
    "dataset": "shop_reports_dev.sales_3d",
    # A day's sales are in the three windows ending on it and on the two days after it.
    "dependencies": [{**ITEM["dependencies"][0], "TargetRange": {"count": 3, "step": {"days": 1}}}],  # type: ignore[index]
    "partitionColumn": "day",
    "partitionPythonMask": "%Y-%m-%d",
    "steps": [
        {
            "db": "shop_reports_dev",
            "info": "sales of the three days ending on the partition's",
            "sql": "INSERT INTO shop_reports_dev.sales_3d SELECT sum(amount), '$day' "
            "FROM shop_pos_dev.sales WHERE day BETWEEN '$first_day' AND '$day'",
        }
    ],
    "date_substitutions": [
        {"token": "$day", "format": "%Y-%m-%d", "relativedelta_attributes": {"days": 0}},
        {"token": "$first_day", "format": "%Y-%m-%d", "relativedelta_attributes": {"days": -2}},
    ],
}
WINDOW_TABLE = """
CREATE EXTERNAL TABLE IF NOT EXISTS shop_reports_dev.sales_3d (amount DOUBLE)
PARTITIONED BY (day STRING) STORED AS PARQUET LOCATION '$analytics_root/sales_3d/';
"""


def assert_figures(root: Path, by_store: dict[str, dict[str, float]], windows: dict[str, float]) -> None:
    """The daily totals per store and the 3-day windows, as computed by hand from the dropped rows."""
    daily = [[store, amount, day] for day, stores in by_store.items() for store, amount in stores.items()]
    assert sorted(totals(root)["shop_reports_dev.sales_by_store"], key=str) == sorted(daily, key=str)
    expected = [[amount, day] for day, amount in windows.items()]
    assert sorted(totals(root)["shop_reports_dev.sales_3d"], key=str) == sorted(expected, key=str)


def test_run_processes_every_file_of_the_raw_folder(tmp_path: Path) -> None:
    config = project(tmp_path)
    (tmp_path / "deps" / "sales_3d.json").write_text(json.dumps(WINDOW_ITEM))
    with (tmp_path / "tables.sql").open("a") as tables:
        tables.write(WINDOW_TABLE)
    drop(tmp_path, "2024-03-01", [("north", 10.0), ("south", 5.5), ("north", 2.5)])
    drop(tmp_path, "2024-03-02", [("south", 1.0)])
    (tmp_path / "incoming" / "not a key.csv").write_text("x\n1\n")
    result = lakeline_run(config)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "skipped" in result.stdout
    # Each day reached the three trailing windows that contain it.
    assert_figures(
        tmp_path,
        {"2024-03-01": {"north": 12.5, "south": 5.5}, "2024-03-02": {"south": 1.0}},
        {"2024-03-01": 18.0, "2024-03-02": 19.0, "2024-03-03": 19.0, "2024-03-04": 1.0},
    )
    assert (tmp_path / "ws" / "lineage.html").exists()

    # A no-op rerun and a late file are in tests/e2e/test_generated_project.py.

    # A backfill of one target over one day: routed again, rebuilt with the same figures. Run from another
    # folder with the workspace alone, it finds the project the workspace's run ran.
    (tmp_path / "elsewhere").mkdir()
    target = ("--target", "shop_reports_dev.sales_by_store")
    rebuilt = reprocess_sales(config, "2024-03-01", "2024-03-01", *target, elsewhere=tmp_path / "elsewhere")
    assert rebuilt.returncode == 0, rebuilt.stdout[-2000:] + rebuilt.stderr[-2000:]
    assert "1 partitions routed again; rebuilt 1 targets" in rebuilt.stdout
    assert "stage B: shop_reports_dev.sales_by_store/day=2024-03-01" in rebuilt.stdout
    summary = json.loads((tmp_path / "ws" / "summary.json").read_text())
    assert (summary["stage_a_runs"], summary["stage_b_runs"]) == (0, 1)
    assert totals(tmp_path)["shop_reports_dev.sales_by_store"][0] == ["north", 12.5, "2024-03-01"]

    # The stage table's settings changed (two buckets): its partitions are rebuilt from their raw
    # files, and everything they feed after them, with the same figures.
    with config.open("a") as settings:
        settings.write("tables_settings:\n  shop_pos_dev.sales: {bucketed_by: [store], bucket_count: 2}\n")
    resent = reprocess_sales(config, "2024-03-01", "2024-03-02", "--raw")
    assert resent.returncode == 0, resent.stdout[-2000:] + resent.stderr[-2000:]
    assert "2 partitions; sent 2 raw files through stage A again" in resent.stdout
    summary = json.loads((tmp_path / "ws" / "summary.json").read_text())
    assert summary["stage_a_runs"] == 2 and summary["failures"] == []
    files = {t["partition"]: (t["rows"], t["files"]) for t in summary["tables"] if t["table"] == "shop_pos_dev.sales"}
    assert files == {"day=2024-03-01": (3, 2), "day=2024-03-02": (1, 2)}  # an empty bucket is a padding file
    assert_figures(
        tmp_path,
        {"2024-03-01": {"north": 12.5, "south": 5.5}, "2024-03-02": {"south": 1.0}},
        {"2024-03-01": 18.0, "2024-03-02": 19.0, "2024-03-03": 19.0, "2024-03-04": 1.0},
    )


def test_files_that_break_their_table_contract_are_quarantined_and_load_once_fixed(tmp_path: Path) -> None:
    config = project(tmp_path)
    drop(tmp_path, "2024-03-01", [("north", 10.0), ("south", 5.5)])  # makes the table: store, amount
    drop(tmp_path, "2024-03-02", [("south", 1.0)])
    day = tmp_path / "incoming" / "shop" / "pos" / "sales" / "day=2024-03-02"
    (day / "late.csv").write_text("amount,store\n7,north\n")  # columns moved: read by name, not position
    (day / "typo.csv").write_text("store,amount\nnorth,12,5\n")  # a decimal comma: one field too many
    (day / "notes.txt").write_text("store,amount\nnorth,1\n")
    returns = tmp_path / "incoming" / "shop" / "pos" / "returns" / "day=2024-03-01"
    returns.mkdir(parents=True)
    (returns / "returns.csv").write_bytes(b"PAR1" + b"\0" * 16 + b"PAR1")  # a new table's first file
    # A new table whose first file cannot be typed (a column name no table can have): the whole table is
    # parked, its good second file too, as the local deployment parks it; the rest of the project loads.
    prices = tmp_path / "incoming" / "shop" / "pos" / "prices"
    prices.mkdir(parents=True)
    (prices / "a.csv").write_text("store,unit price\nnorth,2\n")
    (prices / "b.csv").write_text("store,price\nnorth,3\n")

    result = lakeline_run(config)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads((tmp_path / "ws" / "summary.json").read_text())
    reasons = "\n".join(summary["quarantined"])
    assert len(summary["quarantined"]) == 5, reasons
    assert "typo.csv: line 2 has 3 fields, the header 2" in reasons
    assert "notes.txt: cannot tell its format from its name" in reasons
    assert "returns.csv: is a parquet file named as csv" in reasons
    refused = (
        "table shop_pos_raw_dev.prices cannot be made from its first file shop/pos/prices/a.csv: column 'unit price' "
        "is not a valid name"
    )
    assert f"shop/pos/prices/a.csv: {refused}" in reasons and f"shop/pos/prices/b.csv: {refused}" in reasons
    assert next(reason for reason in summary["refused_tables"] if "prices" in reason).startswith(refused)
    assert "quarantined" in result.stdout and "typo.csv" in result.stdout
    # The command's last word names each table it could not make, and why.
    assert "error: 0 runs failed and 5 files were quarantined" in result.stderr
    assert f"  - {refused}" in result.stderr, result.stderr
    assert summary["failures"] == []
    # The moved columns are read by name, through a copy in the table's order next to the file.
    copy = day / "late.lakeline-by-name.csv"
    assert summary["read_by_name"] == [
        f"{day.relative_to(tmp_path / 'incoming').as_posix()}/late.csv as "
        f"{copy.relative_to(tmp_path / 'incoming').as_posix()}"
    ]
    assert "read by name" in result.stdout and copy.read_text() == "store,amount\nnorth,7\n"
    # Everything else loaded, and nothing of the refused files did.
    assert totals(tmp_path)["shop_reports_dev.sales_by_store"] == [
        ["north", 7.0, "2024-03-02"],
        ["north", 10.0, "2024-03-01"],
        ["south", 1.0, "2024-03-02"],
        ["south", 5.5, "2024-03-01"],
    ]
    records = sorted(p.name for p in (tmp_path / "ws" / "quarantine").rglob("*.json"))
    assert records == ["a.csv.json", "b.csv.json", "notes.txt.json", "returns.csv.json", "typo.csv.json"]

    # Fixed and re-sent: the late file, now in the table's order, replaces its rows through its copy.
    (day / "late.csv").write_text("store,amount\nnorth,8\n")
    (day / "typo.csv").write_text("store,amount\nnorth,12.5\n")
    for removed in (day / "notes.txt", returns / "returns.csv", prices / "a.csv"):
        removed.unlink()
    result = lakeline_run(config)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # Its bad first file gone, the table is made from the next one, which loads.
    assert {"table": "shop_pos_dev.prices", "partition": "", "rows": 1, "files": 1} in json.loads(
        (tmp_path / "ws" / "summary.json").read_text()
    )["tables"]
    assert totals(tmp_path)["shop_reports_dev.sales_by_store"] == [
        ["north", 10.0, "2024-03-01"],
        ["north", 20.5, "2024-03-02"],
        ["south", 1.0, "2024-03-02"],
        ["south", 5.5, "2024-03-01"],
    ]
    assert copy.read_text() == "store,amount\nnorth,8\n"
    assert list((tmp_path / "ws" / "quarantine").rglob("*.json")) == []


def test_watch_processes_files_as_they_land_until_ctrl_c(tmp_path: Path) -> None:
    """``watch`` takes a file dropped while it runs, and Ctrl-C (SIGINT) ends it cleanly, its summary written
    (``--duration`` ending it: ``test_example_project.py``)."""
    config = project(tmp_path)
    (tmp_path / "incoming").mkdir()
    watcher = subprocess.Popen(
        # --duration only bounds a watcher the test fails to stop.
        [*LAKELINE, "watch", "--embedded", "--config", str(config), "--poll", "0.5", "--duration", "300"],
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert watcher.stdout is not None
    started = time.monotonic()
    for line in watcher.stdout:
        if "watching" in line:
            break
        assert time.monotonic() - started < 120, "the watcher did not start"
    drop(tmp_path, "2024-03-05", [("east", 3.0), ("east", 4.0)])
    # The pipeline state is saved once the flow of the files taken is idle: the target's partition in it means
    # the file went all the way through; Ctrl-C then lands while the watcher waits for the next look.
    state = tmp_path / "ws" / "state" / "pipeline-state.json"
    while "shop_reports_dev.sales_by_store" not in (state.read_text() if state.exists() else ""):
        assert watcher.poll() is None and time.monotonic() - started < 240, "the file was not processed"
        time.sleep(0.5)
    watcher.send_signal(signal.SIGINT)
    output, _ = watcher.communicate(timeout=300)
    assert watcher.returncode == 0, output[-3000:]
    assert "stopped" in output.splitlines(), output[-3000:]
    assert totals(tmp_path)["shop_reports_dev.sales_by_store"] == [["east", 7.0, "2024-03-05"]]


def test_an_invalid_project_file_is_reported(tmp_path: Path) -> None:
    config = tmp_path / "lakeline.yml"
    config.write_text("workspace: [1, 2]\n")
    result = subprocess.run([*LAKELINE, "run", "--config", str(config)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "lakeline.yml" in result.stderr
    # Another mistake, the same way (in this process: no process start for a refusal made before anything runs).
    config.write_text("unknown_setting: 1\n")
    ran = invoke(["run", "--config", str(config)], tmp_path)
    assert ran.returncode == 2
    assert "lakeline.yml" in ran.stderr


# A run that cannot route or plan some targets and builds the rest (issue 17): tests/e2e/test_hostile_paths.py,
# in the same run as a failed step in a workspace named with '#' and '?'.
