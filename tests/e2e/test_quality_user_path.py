"""Quality gates as a user meets them (#41's "done when"), on ``lakeline run``'s default runtime (the local
deployment): ``examples/shop`` declares three ``block`` rules on its sales table; a file that breaks one is
blocked (the rule and the failing rows said, the previous figures still served, the target not rebuilt, the
failure in ``status``, the file in ``dlq list``, the run's lineage event FAIL with the reason); the fixed file
sent again is published. Then ``reprocess`` rebuilds the target through its own checks (a rule added to its
dependency item that the rebuilt version breaks): blocked, nothing published, exit 1."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_demo import run
from tests.e2e.test_example_project import expected_sales_by_store, table_rows

pytestmark = pytest.mark.spark

RULE = 'ColumnValues "store" in ["north", "south", "east", "west"]'
LATE = Path("incoming/shop/pos/sales/day=2024-03-03/late.csv")
DAY = "day=2024-03-03"


def summary(project: Path) -> dict[str, Any]:
    return dict(json.loads((project / ".lakeline" / "deployed" / "summary.json").read_text()))


def tables(project: Path) -> dict[tuple[str, str], int]:
    return {(t["table"], t["partition"]): t["rows"] for t in summary(project)["tables"]}


def served(project: Path) -> list[tuple[str, int, float, str]]:
    """What readers of ``sales_by_store`` get now, through ``lakeline sql`` (the deployment's Athena)."""
    query = "SELECT store, orders, amount, day FROM shop_reports_dev.sales_by_store ORDER BY day, store"
    answer = run(["sql", "-q", query], cwd=project)
    assert answer.returncode == 0, answer.stdout[-3000:] + answer.stderr[-3000:]
    return [(store, int(n), float(amount), day) for store, n, amount, day in table_rows(answer.stdout)]


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    project = tmp_path_factory.mktemp("quality") / "shop"
    shutil.copytree(Path(__file__).resolve().parents[2] / "examples" / "shop", project)
    first = run(["run"], cwd=project)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    yield project
    run(["sql", "--stop"], cwd=project)


def test_a_file_breaking_a_block_rule_is_blocked_and_the_fixed_one_published(shop: Path) -> None:
    settings = yaml.safe_load((shop / "lakeline.yml").read_text())["tables_settings"]["shop_pos_dev.sales"]
    assert [check["rule"] for check in settings["checks"]][2] == RULE, "the example declares three rules"
    before_tables, before_served = tables(shop), served(shop)
    assert before_served == expected_sales_by_store(shop)

    (shop / LATE).write_text("order_id,store,amount\n3003,nowhere,5.00\n3004,north,1.25\n")
    blocked = run(["run"], cwd=shop)
    said = blocked.stdout + blocked.stderr
    assert blocked.returncode == 1, said[-3000:]
    assert f"rule '{RULE}' failed" in said and '"store":"nowhere"' in said, said[-3000:]
    ran = summary(shop)
    assert ran["stage_b_runs"] == 0, "the target not rebuilt"
    (failed,) = ran["failed_executions"]
    assert "QualityBlocked" in json.dumps(failed), failed
    assert tables(shop) == before_tables
    (reason,) = ran["parked"]["StageA"]
    assert reason.startswith(f"quality failed: QualityBlocked: quality checks blocked shop_pos_dev.sales ({DAY}): ")
    assert f"""rule '{RULE}' failed (metric 0.75), failing rows: [{{"order_id":"3003","store":"nowhere",""" in reason
    assert served(shop) == before_served, "readers get the previous figures"
    # `lakeline check` on what is published: the previous version passes. Without a running `up`, its queries go
    # to the deployment's SQL server that `lakeline sql` started above, which answers them.
    server = json.loads((shop / ".lakeline" / "state" / "sql-server.json").read_text())
    checked = run(["check", "--table", "shop_pos_dev.sales", "--partition", DAY], cwd=shop)
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    assert checked.stdout.startswith(f"shop_pos_dev.sales ({DAY}): 3/3 passed"), checked.stdout
    assert server["mode"] == "deployed"
    assert json.loads((shop / ".lakeline" / "state" / "sql-server.json").read_text())["pid"] == server["pid"]

    workspace = ["--workspace", str(shop / ".lakeline")]
    status = run(["status", *workspace], cwd=shop.parent)  # read from the kept deployment, nothing stood up
    assert status.returncode == 1 and "parked in stage a: " in status.stdout, status.stdout[-3000:]
    assert "QualityBlocked" in status.stdout and "nowhere" in status.stdout
    # Named by the file that was blocked, which is what the user fixes.
    assert f"parked in stage a: {LATE.relative_to('incoming')}: quality failed: " in status.stdout, status.stdout
    # The partition keeps its version, whose checks all passed.
    assert re.search(rf"shop_pos_dev\.sales\s+│ {DAY}\s+│\s+1 │.*3/3 passed", status.stdout), status.stdout
    listed = run(["dlq", "list", *workspace], cwd=shop.parent)
    assert listed.returncode == 1 and "stage-a: 1 parked" in listed.stdout, listed.stdout[-3000:]
    assert f"quality checks blocked shop_pos_dev.sales ({DAY})" in listed.stdout
    assert f"rule '{RULE}' failed" in listed.stdout, listed.stdout[-3000:]
    assert f"\n    {LATE.relative_to('incoming')}\n" in listed.stdout, listed.stdout[-3000:]
    # The lineage: the blocked run's OpenLineage run ended FAIL with the rule in its error.
    events = [json.loads(line) for line in (shop / ".lakeline/deployed/lineage/openlineage.jsonl").open()]
    failed = {e["job"]["name"] for e in events if RULE in e["run"]["facets"].get("errorMessage", {}).get("message", "")}
    assert failed == {"pipeline", "stage_a", "stage_a.shop_pos_dev.sales.quality"}, [e["eventType"] for e in events]

    (shop / LATE).write_text("order_id,store,amount\n3003,west,5.00\n3004,north,1.25\n")
    fixed = run(["run"], cwd=shop)
    assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-3000:]
    ran = summary(shop)
    assert (ran["stage_a_runs"], ran["stage_b_runs"], ran["parked"]) == (1, 1, {})
    assert tables(shop)[("shop_pos_dev.sales", DAY)] == 4
    assert served(shop) == expected_sales_by_store(shop) != before_served
    assert [(r["table"], r["blocked"]) for r in ran["quality"]] == [(f"shop_pos_dev.sales ({DAY})", False)]


def test_reprocess_rebuilds_through_the_targets_checks_and_a_blocked_rebuild_publishes_nothing(shop: Path) -> None:
    item = shop / "dependencies" / "sales_by_store.json"
    before = served(shop)
    item.write_text(json.dumps({**json.loads(item.read_text()), "checks": [{"rule": "RowCount > 2"}]}))
    # 2024-03-01 has three stores (passes), 2024-03-02 two (blocked).
    rebuilt = run(["reprocess", "--table", "shop_pos_dev.sales", "--from", "2024-03-01", "--to", "2024-03-02"], shop)
    said = rebuilt.stdout + rebuilt.stderr
    assert rebuilt.returncode == 1, said[-3000:]
    assert "rule 'RowCount > 2' failed (metric 2)" in said, said[-3000:]
    ran = summary(shop)
    assert ran["stage_b_runs"] == 2, "both days' targets run again"
    (failed,) = ran["failed_executions"]
    assert "sales_by_store (day=2024-03-02): rule 'RowCount > 2' failed" in failed["cause"], failed
    assert "QualityBlocked" in json.dumps(ran["parked"]) and "day=2024-03-02" in json.dumps(ran["parked"])
    assert served(shop) == before, "the blocked day keeps its version; the other is the same figures rebuilt"
