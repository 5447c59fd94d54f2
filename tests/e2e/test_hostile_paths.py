"""``lakeline run`` over folders and files a real lake receives: a workspace whose path holds '#' or
'?', and JSON files whose nested keys are not names. Nothing outside a failed run's own prefix is
deleted, and nothing outside the workspace is read into the lake or written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.test_run_and_watch import ITEM, drop, lakeline_run, project


def failing_item() -> dict[str, Any]:
    """The project's stage B item with a step that fails on Spark (a column the source does not have)."""
    (step,) = ITEM["steps"]
    return {**ITEM, "steps": [{**step, "sql": step["sql"].replace(" GROUP BY", " AND no_such_column = 1 GROUP BY")}]}


def summary(workspace: Path) -> Any:
    return json.loads((workspace / "summary.json").read_text())


def test_a_failed_run_in_a_workspace_named_with_a_hash_and_a_question_mark_deletes_only_its_own_prefix(
    tmp_path: Path,
) -> None:
    """Parsed as a URL, the failed run's prefix ``<project>/?lake#x/analytics/.../lakeline_run=.../`` was
    cut at the '?' (or at a '#') and the failure function deleted the whole project folder. One run covers
    both characters (each alone is in tests/unit/test_storage.py)."""
    workspace_name = "?lake#x"
    root = tmp_path / "project"
    config = project(root)
    (root / "deps" / "sales_by_store.json").write_text(json.dumps(failing_item()))
    config.write_text(config.read_text().replace("workspace: ws", f"workspace: {json.dumps(workspace_name)}"))
    drop(root, "2024-03-01", [("north", 10.0), ("south", 5.5)])
    raw_file = root / "incoming" / "shop" / "pos" / "sales" / "day=2024-03-01" / "sales.csv"
    sentinel = root / "sentinel.txt"
    sentinel.write_text("not the pipeline's")

    result = lakeline_run(config)

    assert sentinel.read_text() == "not the pipeline's", result.stdout[-3000:] + result.stderr[-3000:]
    assert raw_file.exists() and config.exists()
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    workspace = root / workspace_name
    (failure,) = summary(workspace)["failures"]
    assert "no_such_column" in failure and "\n" not in failure
    # Stage A's output is there; the failed stage B run left no prefix behind.
    stage = workspace / "stage" / "shop" / "pos" / "sales" / "day=2024-03-01"
    assert [p.name[: len("lakeline_run=")] for p in stage.iterdir()] == ["lakeline_run="]
    assert list((workspace / "analytics").rglob("lakeline_run=*")) == []


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
