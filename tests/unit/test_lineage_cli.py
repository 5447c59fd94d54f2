"""``lakeline lineage trace`` from a records file and ``lakeline lineage show`` from a local archive."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

from typer.testing import CliRunner

from lakeline.cli import app
from lakeline.lineage.records.archive import bucket_object_key
from lakeline.lineage.records.model import build_records

runner = CliRunner()
NOW = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)


def write_records(path: Path) -> list[str]:
    """A run: raw input, a split into two outputs, one of them calculated; returns the node ids."""
    raw = build_records(
        {"root_id": "run-1", "parent_id": "run-1", "action_taken": "RAW_DATA_INPUT", "storage_location": "s3://raw/f"},
        now=NOW,
    )
    split = build_records(
        {"root_id": "run-1", "parent_id": raw[0].node_id, "action_taken": "GLUE_BATCH_SPLIT",
         "records": [{"storage_location": "s3://stage/p1"}, {"storage_location": "s3://stage/p2"}]},
        now=NOW,
    )  # fmt: skip
    done = build_records(
        {"root_id": "run-1", "parent_id": split[0].node_id, "action_taken": "CALCULATION_COMPLETE",
         "storage_location": "s3://enriched/p1"},
        now=NOW,
    )  # fmt: skip
    other_root = build_records(
        {"root_id": "run-2", "parent_id": "run-2", "action_taken": "RAW_DATA_INPUT", "storage_location": "s3://raw/g"},
        now=NOW,
    )
    records = raw + split + done + other_root
    path.write_text("\n".join(json.dumps(r.to_message()) for r in records) + "\n")
    return [r.node_id for r in raw + split + done]


def test_trace_prints_a_roots_tree_and_archives_it(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    raw, p1, p2, done = write_records(records)
    archive = tmp_path / "lineage-archive"
    result = runner.invoke(
        app,
        ["lineage", "trace", "--root", "run-1", "--records", str(records), "--archive", str(archive),
         "--date", "2026-11-23", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    tree = json.loads(result.stdout)
    assert tree["nodes"] == 4 and tree["statuses"] == {"complete": 1, "unterminated": 1}
    assert [line["path"] for line in tree["lines"]] == [[raw, p1, done], [raw, p2]]
    # Compacted right after the trace: in its day object, nothing left staged.
    assert [p.relative_to(archive).as_posix() for p in archive.rglob("*.jsonl")] == [
        bucket_object_key(date(2026, 11, 23), "run-1")
    ]

    text = runner.invoke(app, ["lineage", "trace", "--root", "run-1", "--records", str(records)])
    assert text.exit_code == 0
    assert "CALCULATION_COMPLETE" in text.stdout and "[unterminated]" in text.stdout
    assert "4 nodes, 2 records (1 complete, 1 unterminated)" in text.stdout

    shown = runner.invoke(app, ["lineage", "show", "--root", "run-1", "--archive", str(archive), "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["lines"] == tree["lines"]


def test_trace_and_show_explain_what_is_wrong(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    write_records(records)
    both = runner.invoke(app, ["lineage", "trace", "--root", "run-1", "--records", str(records), "--table", "t"])
    assert both.exit_code == 2 and "exactly one source" in both.stderr
    bad_root = runner.invoke(app, ["lineage", "trace", "--root", "run 1", "--records", str(records)])
    assert bad_root.exit_code == 2 and "is not a valid lineage id" in bad_root.stderr
    missing = runner.invoke(app, ["lineage", "trace", "--root", "run-9", "--records", str(records)])
    assert missing.exit_code == 1 and "has no lineage records" in missing.stderr
    nothing = runner.invoke(app, ["lineage", "show", "--root", "run-1", "--archive", str(tmp_path / "empty")])
    assert nothing.exit_code == 1 and "no archived lines" in nothing.stderr
    bad_date = runner.invoke(
        app, ["lineage", "trace", "--root", "run-1", "--records", str(records), "--date", "23/11/2026"]
    )
    assert bad_date.exit_code == 2 and "YYYY-MM-DD" in bad_date.stderr
