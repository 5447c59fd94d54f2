"""``lakeline run`` over folders and files a real lake receives: a workspace whose path holds '#' or
'?', and JSON files whose nested keys are not names. Nothing outside a failed run's own prefix is
deleted, and nothing outside the workspace is read into the lake or written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.test_run_and_watch import ITEM, TABLES, drop, lakeline_run, project

TARGETS = ("sales_by_store", "sales_failing", "sales_a_century_on", "sales_twice")


def failing_item() -> dict[str, Any]:
    """The project's stage B item with a step that fails on Spark (a column the source does not have)."""
    (step,) = ITEM["steps"]
    return {**ITEM, "steps": [{**step, "sql": step["sql"].replace(" GROUP BY", " AND no_such_column = 1 GROUP BY")}]}


def summary(workspace: Path) -> Any:
    return json.loads((workspace / "summary.json").read_text())


def test_failed_targets_in_a_workspace_named_with_a_hash_and_a_question_mark_fail_alone(tmp_path: Path) -> None:
    """One run (a Spark start each costs much), two checks.

    A failed step in a workspace named ``?lake#x``: parsed as a URL, the failed run's prefix
    ``<project>/?lake#x/analytics/.../lakeline_run=.../`` was cut at the '?' (or at a '#') and the failure
    function deleted the whole project folder. One run covers both characters (each alone is in
    tests/unit/test_storage.py).

    Issue 17: a target whose routing failed blocked every other target of the arrival, and a step file holding
    two statements never built its target; neither was reported and the run exited 0. Each of the three
    failures is reported on its line, and the arrival's other target is built."""
    workspace_name = "?lake#x"
    root = tmp_path / "project"
    config = project(root)
    config.write_text(config.read_text().replace("workspace: ws", f"workspace: {json.dumps(workspace_name)}"))
    failing = json.loads(json.dumps(failing_item()).replace("sales_by_store", "sales_failing"))
    later = json.loads(json.dumps(ITEM).replace("sales_by_store", "sales_a_century_on"))
    later["dependencies"][0]["relativedelta_attributes"] = {"years": 100}
    twice = json.loads(json.dumps(ITEM).replace("sales_by_store", "sales_twice"))
    twice["steps"] = [{"db": "shop_reports_dev", "sql_file": "twice.sql", "info": "two statements"}]
    for name, item in (("failing", failing), ("later", later), ("twice", twice)):
        (root / "deps" / f"{name}.json").write_text(json.dumps(item))
    (root / "queries" / "shop").mkdir(parents=True)
    step = (
        "INSERT INTO shop_reports_dev.sales_twice SELECT store, sum(amount), '$day' FROM shop_pos_dev.sales GROUP BY 1"
    )
    (root / "queries" / "shop" / "twice.sql").write_text(f"{step};\n{step}\n")
    with config.open("a") as file:
        file.write("queries: queries\n")
    (root / "tables.sql").write_text("".join(TABLES.replace("sales_by_store", name) for name in TARGETS))
    day = "9950-01-01"  # + 100 years is past the calendar's end
    drop(root, day, [("north", 10.0), ("south", 5.5)])
    raw_file = root / "incoming" / "shop" / "pos" / "sales" / f"day={day}" / "sales.csv"
    sentinel = root / "sentinel.txt"
    sentinel.write_text("not the pipeline's")

    result = lakeline_run(config)

    assert sentinel.read_text() == "not the pipeline's", result.stdout[-3000:] + result.stderr[-3000:]
    assert raw_file.exists() and config.exists()
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    workspace = root / workspace_name
    failures = summary(workspace)["failures"]
    assert len(failures) == 3 and all("\n" not in failure for failure in failures), failures
    (failure,) = [failure for failure in failures if "shop_reports_dev.sales_failing" in failure]
    assert "no_such_column" in failure
    failed = [line for line in result.stdout.splitlines() if line.startswith("failed ")]
    assert len(failed) == 3, result.stdout[-3000:]
    assert any(
        "→ shop_reports_dev.sales_a_century_on: not routed:" in line and "out of range" in line for line in failed
    )
    assert any(
        f"shop_reports_dev.sales_twice/day={day}: cannot be planned:" in line
        and "a step holds exactly one statement, found 2" in line
        for line in failed
    )
    assert any("shop_reports_dev.sales_failing" in line and "no_such_column" in line for line in failed)
    # The arrival's other target is built.
    built = summary(workspace)["contents"]["shop_reports_dev.sales_by_store"]
    assert sorted(built, key=str) == [["north", 10.0, day], ["south", 5.5, day]]
    # Stage A's output is there; the failed stage B run left no prefix behind, and took nothing else with it.
    stage = workspace / "stage" / "shop" / "pos" / "sales" / f"day={day}"
    # (The version's folder, and beside it the list of what it holds: lakeline.commits.applied.)
    versions = [p for p in stage.iterdir() if not (p / "applied").is_dir()]
    assert [p.name[: len("lakeline_run=")] for p in versions] == ["lakeline_run="]
    assert len(list(stage.iterdir())) == 2
    prefixes = list((workspace / "analytics").rglob("lakeline_run=*"))
    assert [p for p in prefixes if "sales_failing" in p.parts] == []
    assert [p for p in prefixes if "sales_by_store" in p.parts], prefixes


def test_json_files_whose_nested_keys_are_not_names_are_refused_naming_the_file_and_field(tmp_path: Path) -> None:
    """A nested key reached CREATE TABLE unquoted: this one pointed the raw table at a folder outside the
    workspace, and stage A copied the file it found there into the lake."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "credentials.json").write_text(json.dumps({"id": 42, "payload": {"x": "SECRET-TOKEN-4f1c"}}) + "\n")
    outside_before = {path: path.read_bytes() for path in outside.rglob("*")}
    hostile = f"x:string>) USING json LOCATION 'file://{outside}' --"
    root = tmp_path / "project"
    raw = root / "incoming" / "shop" / "pos"
    files = {
        "evil/e.json": {"id": 1, "payload": {hostile: "a"}},
        "odd/day=1/o.json": {"id": 2, "info": {"tags": [{"first name": "b"}]}},
        "good/day=1/g.json": {"id": 3, "info": {"firstName": "c", "tags": [{"k": 1}], "attrs": {"size": "m"}}},
    }
    for name, row in files.items():
        (raw / name).parent.mkdir(parents=True)
        (raw / name).write_text(json.dumps(row) + "\n")
    config = root / "lakeline.yml"
    # Uncompressed JSON and a whole-partition rewrite: whatever is read lands in the lake as text.
    config.write_text(
        "workspace: ws\nraw: incoming\ndefault_table: {format: JSON, compression: NONE, write_policy: rewrite}\n"
    )

    result = lakeline_run(config)

    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-4000:]
    workspace = root / "ws"
    failures = sorted(summary(workspace)["quarantined"])
    assert len(failures) == 2, failures
    evil, odd = failures
    # Each file is its table's first: the table cannot be made, and the reason says which and why.
    assert evil.startswith(
        "shop/pos/evil/e.json: table shop_pos_raw.evil cannot be made from its first file shop/pos/evil/e.json: "
        "field under payload "
    )
    assert repr(hostile) in evil and "is not a valid name" in evil and "\n" not in evil
    assert odd == (
        "shop/pos/odd/day=1/o.json: table shop_pos_raw.odd cannot be made from its first file "
        "shop/pos/odd/day=1/o.json: field under info.tags[] 'first name' is not a valid name: use letters, digits "
        "and '_', starting with a letter, at most 128 characters"
    )
    assert f"quarantined {odd}" in result.stdout.splitlines(), "the reason is printed on one line"
    # The good table loads, nested names kept as the data spells them; the refused ones have no table.
    assert [row["table"] for row in summary(workspace)["tables"]] == ["shop_pos.good"]
    assert {path: path.read_bytes() for path in outside.rglob("*")} == outside_before
    leaked = [path for path in workspace.rglob("*") if path.is_file() and b"SECRET-TOKEN-4f1c" in path.read_bytes()]
    assert leaked == []
