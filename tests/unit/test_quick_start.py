"""Which JVM a workspace's Spark gets: the quick-start one while its raw files are few
(``lakeline.project.relocation.small_lake``), the default one over much data."""

from __future__ import annotations

from pathlib import Path

from lakeline.project.relocation import small_lake


def test_a_lake_within_the_limit_is_small_and_one_past_it_is_not(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    (raw / "team" / "dataset" / "table").mkdir(parents=True)
    (raw / "team" / "dataset" / "table" / "a.csv").write_bytes(b"x" * 600)
    (raw / "team" / "b.csv").write_bytes(b"x" * 400)

    assert small_lake(raw, limit=1_000)
    assert not small_lake(raw, limit=999)


def test_a_workspace_without_raw_files_is_small(tmp_path: Path) -> None:
    assert small_lake(tmp_path / "absent", limit=0)
