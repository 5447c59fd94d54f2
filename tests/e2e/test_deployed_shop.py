"""The README's shop commands (``examples/shop``) on the local deployment, as a user runs them: ``lakeline run``
(the default runtime), ``status`` and ``sql``; then the project rerun, copied elsewhere with a late file and bad
ones, and watched. Apart from ``test_deployed_demo.py``: each module is a unit of its own under xdist, so the two
stand-ups run on both workers at once."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.in_process import invoke
from tests.e2e.test_demo import run
from tests.e2e.test_example_project import DEPLOYED_BLOCK, expected_sales_by_store, readme_block, table_rows
from tests.e2e.test_example_project import run as example_run

pytestmark = pytest.mark.spark


SHOP_TABLES = {
    ("shop_pos_dev.sales", "day=2024-03-01"): 6,
    ("shop_pos_dev.sales", "day=2024-03-02"): 3,
    ("shop_pos_dev.sales", "day=2024-03-03"): 2,
    ("shop_pos_dev.stores", ""): 4,
    ("shop_reports_dev.sales_by_store", "day=2024-03-01"): 3,
    ("shop_reports_dev.sales_by_store", "day=2024-03-02"): 2,
    ("shop_reports_dev.sales_by_store", "day=2024-03-03"): 2,
}


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[Any]]]:
    """The README's commands on ``examples/shop`` (a copy): ``lakeline run`` (on the local deployment, by
    default), ``status`` and ``sql`` (which follow the runtime the last run used), as shown."""
    project = tmp_path_factory.mktemp("shop") / "shop"
    shutil.copytree(Path(__file__).resolve().parents[2] / "examples" / "shop", project)
    (cd, where), *commands = readme_block(DEPLOYED_BLOCK)
    assert (cd, where) == ("cd", "examples/shop")
    results = []
    for command in commands:
        results.append(example_run(command, project))
        assert results[-1].returncode == 0, results[-1].stdout[-3000:] + results[-1].stderr[-3000:]
    yield project, results
    run(["sql", "--stop"], cwd=project)  # the README's `sql` started the deployment's SQL server


def test_the_readme_shop_commands_run_on_the_local_deployment(shop: tuple[Path, list[Any]]) -> None:
    project, (ran, status, queried) = shop
    # The two files of 2024-03-01 are uploaded together: queue A's batching window takes them in one batch, and
    # they make one run (not a run and its follow-up), whose stage B run is the day's only one.
    assert "stage A executions: 4" in ran.stdout and "stage B executions: 3" in ran.stdout
    assert status.stdout.startswith("the local deployment kept in"), status.stdout[:300]
    rows = [(store, int(n), float(amount), day) for store, n, amount, day in table_rows(queried.stdout)]
    assert rows == expected_sales_by_store(project)
    # `sql` stood the deployment up in a server: the next statement is answered by it, without a stand-up.
    record = json.loads((project / ".lakeline" / "state" / "sql-server.json").read_text())
    assert record["mode"] == "deployed", record
    count = ["sql", "--format", "csv", "-q", "SELECT count(*) AS n FROM shop_reports_dev.sales_by_store"]
    again = run(count, cwd=project)
    assert (again.returncode, again.stdout) == (0, "n\n7\n"), again.stderr[-3000:]
    assert json.loads((project / ".lakeline" / "state" / "sql-server.json").read_text())["pid"] == record["pid"]
    # From another folder, naming only the workspace: the project is the one its run ran (answered by the same
    # server); the SQL parser's warning on a statement it does not model is in the workspace's log, not on stderr.
    shown = run(["sql", "--workspace", str(project / ".lakeline"), "-q", "SHOW DATABASES"], cwd=project.parent)
    assert (shown.returncode, shown.stderr) == (0, ""), shown.stderr[-3000:]
    assert "shop_pos_dev" in shown.stdout
    log = (project / ".lakeline" / "state" / "lakeline.log").read_text()
    assert "WARNING sqlglot: 'SHOW DATABASES' contains unsupported syntax" in log
    assert json.loads((project / ".lakeline" / "state" / "sql-server.json").read_text())["pid"] == record["pid"]


def _summary(project: Path) -> dict[str, Any]:
    return dict(json.loads((project / ".lakeline" / "deployed" / "summary.json").read_text()))


def _tables(summary: dict[str, Any]) -> dict[tuple[str, str], int]:
    return {(t["table"], t["partition"]): t["rows"] for t in summary["tables"]}


def test_a_project_runs_on_the_deployed_system_with_its_tables_made_from_its_files(
    shop: tuple[Path, list[Any]],
) -> None:
    """``lakeline run`` on ``examples/shop``: its own DDL, queries and items; the raw and stage
    tables it has no DDL for made from the first file of each table folder (one unpartitioned)."""
    project, _ = shop
    summary = _summary(project)
    # The local runtime's results in the same workspace are not the deployed run's to write.
    assert not (project / ".lakeline" / "summary.json").exists()
    assert _tables(summary) == SHOP_TABLES
    assert summary["failed_executions"] == [] and summary["parked"] == {}
    sources = (project / ".lakeline" / "deployed" / "sources.sql").read_text()
    assert "CREATE EXTERNAL TABLE IF NOT EXISTS `shop_pos_raw_dev`.`stores`" in sources
    assert "OpenCSVSerde" in sources and "'skip.header.line.count' = '1'" in sources


def test_the_deployment_lives_on_between_runs_wherever_the_project_goes(
    shop: tuple[Path, list[Any]], tmp_path: Path
) -> None:
    """The deployment's state is kept in the workspace: a rerun with nothing new stands nothing up; the
    project copied elsewhere with a late file and a bad one uploads only those two (the late rows reach the
    partition and its target, the bad file is parked with its reason, exit 1); the bad file fixed is loaded
    by ``watch``, its earlier parked message still listed; a redrive then finds the arrival loaded and
    leaves the DLQ empty."""
    project, _ = shop
    again = run(["run"], cwd=project)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "nothing new since the last run: 5 raw files" in again.stdout
    assert "cdk synth" not in again.stdout + again.stderr

    moved = tmp_path / "elsewhere"
    run(["sql", "--stop"], cwd=project)  # the README's `sql` server: a folder is copied at rest
    shutil.copytree(project, moved)
    sales = moved / "incoming" / "shop" / "pos" / "sales"
    (sales / "day=2024-03-02" / "late.csv").write_text("order_id,store,amount\n2004,north,7.50\n")
    (sales / "day=2024-03-03" / "bad.csv").write_text("order,store\n9,east\n")
    # A new table whose first file cannot be typed (a column name no table can have): its files are parked
    # with the reason and not uploaded; the rest of the project loads.
    prices = moved / "incoming" / "shop" / "pos" / "prices"
    prices.mkdir()
    (prices / "a.csv").write_text("store,unit price\nnorth,2\n")
    (prices / "b.csv").write_text("store,price\nnorth,3\n")
    late = run(["run"], cwd=moved)
    assert late.returncode == 1, late.stdout[-3000:] + late.stderr[-3000:]
    summary = _summary(moved)
    assert summary["uploads"] == 2 and summary["unchanged_raw_files"] == 5
    refused = (
        "table shop_pos_raw_dev.prices cannot be made from its first file shop/pos/prices/a.csv: column 'unit price' "
        "is not a valid name"
    )
    parked_files = [line.split(": ", 1)[0] for line in summary["quarantined"]]
    assert parked_files == ["shop/pos/prices/a.csv", "shop/pos/prices/b.csv"]
    assert all(refused in line for line in summary["quarantined"]) and summary["refused_tables"][0].startswith(refused)
    assert f"  - {refused}" in late.stderr and "2 files were quarantined" in late.stderr, late.stderr[-3000:]
    # The bad file is refused at the door (the router checks its header): no execution.
    assert summary["stage_a_runs"] == 1 and summary["stage_b_runs"] == 1
    assert _tables(summary) == {
        **SHOP_TABLES,
        ("shop_pos_dev.sales", "day=2024-03-02"): 4,
        ("shop_reports_dev.sales_by_store", "day=2024-03-02"): 3,
    }
    (reason,) = summary["parked"]["StageA"]
    assert "bad.csv: header lacks column order_id, amount of table shop_pos_raw_dev.sales" in reason
    # From another folder, naming only the workspace: they find the project the workspace's run ran.
    workspace = ["--workspace", str(moved / ".lakeline")]
    listed = run(["dlq", "list", *workspace], cwd=tmp_path)
    assert listed.returncode == 1 and "stage-a: 1 parked" in listed.stdout and "bad.csv" in listed.stdout
    assert f"quarantine  shop/pos/prices/b.csv  {refused}" in listed.stdout, listed.stdout
    status = run(["status", *workspace], cwd=tmp_path)  # read from the kept state: nothing stood up
    assert status.returncode == 1 and "parked in stage a: " in status.stdout and "bad.csv" in status.stdout
    assert f"quarantined shop/pos/prices/a.csv: {refused}" in status.stdout, status.stdout
    # The late file's partition: its second version, of three files.
    assert re.search(r"shop_pos_dev\.sales\s+│ day=2024-03-02\s+│\s+2 │\s+3 │", status.stdout), status.stdout
    # Which run wrote that version, from which raw file, and the one before (#43): from the deployment's archive.
    show = ["lineage", "show", *workspace, "--partition", "day=2024-03-02"]
    shown = run([*show, "--table", "shop_pos_dev.sales", "--json"], cwd=tmp_path)
    assert shown.returncode == 0, shown.stdout[-3000:] + shown.stderr[-3000:]
    answer = json.loads(shown.stdout)
    assert (answer["version"]["number"], answer["before"]["number"], answer["after"]) == (2, 1, None)
    assert [raw.rsplit("/", 1)[-1] for raw in answer["version"]["raw_files"]] == ["late.csv"]
    # Named by the project file, as `run` and `status` are.
    by_config = ["lineage", "show", "--config", str(moved / "lakeline.yml"), "--partition", "day=2024-03-02"]
    target = run([*by_config, "--table", "shop_reports_dev.sales_by_store"], cwd=tmp_path)
    assert target.returncode == 0, target.stdout[-3000:] + target.stderr[-3000:]
    assert f"shop_pos_dev.sales {answer['version']['version']}" in target.stdout, target.stdout

    # Fixed, it is picked up by `watch` (its first look sees every file; only the changed one is uploaded); the
    # table removed, its files are no longer quarantined.
    (sales / "day=2024-03-03" / "bad.csv").write_text("order_id,store,amount\n3009,east,9.00\n")
    shutil.rmtree(prices)
    fixed = run(["watch", "--duration", "3", "--poll", "1"], cwd=moved)
    assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-3000:]
    summary = _summary(moved)
    assert summary["uploads"] == 1 and summary["unchanged_raw_files"] == 6 and summary["parked"] == {}
    assert summary["parked_by_earlier_runs"] == {"StageA": [reason]}
    assert _tables(summary)[("shop_pos_dev.sales", "day=2024-03-03")] == 3
    assert "still parked (an earlier run)" in fixed.stdout

    redriven = run(["dlq", "redrive", "--queue", "stage-a", *workspace], cwd=tmp_path)
    assert redriven.returncode == 0, redriven.stdout[-3000:] + redriven.stderr[-3000:]
    summary = _summary(moved)
    assert summary["parked"] == {} and summary["parked_by_earlier_runs"] == {}
    assert summary["stage_a_runs_with_nothing_new"] == 1
    assert _tables(summary)[("shop_pos_dev.sales", "day=2024-03-03")] == 3
    # Read from the kept state (in this process: both ran as processes above), from the project's folder.
    assert invoke(["dlq", "list"], moved).returncode == 0
    assert invoke(["status"], moved).returncode == 0
    # A day rebuilt: sent to the deployment's queue B as `reprocess --stack` sends, its target run again.
    rebuilt = run(
        ["reprocess", *workspace, "--table", "shop_pos_dev.sales", "--from", "2024-03-03", "--to", "2024-03-03"],
        cwd=tmp_path,
    )
    assert rebuilt.returncode == 0, rebuilt.stdout[-3000:] + rebuilt.stderr[-3000:]
    assert "1 partitions routed again; rebuilt 1 targets" in rebuilt.stdout
    summary = _summary(moved)
    assert (summary["stage_a_runs"], summary["stage_b_runs"], summary["failed_executions"]) == (0, 1, [])
    assert _tables(summary)[("shop_reports_dev.sales_by_store", "day=2024-03-03")] == 3
    # Nothing of it went to the embedded runtime's results.
    assert not (moved / ".lakeline" / "summary.json").exists()
