"""``lakeline run`` with nothing to do (``lakeline.project.settled``): the record of the last clean run
matches the raw folder and the project only while neither changed."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from lakeline.project.config import ProjectConfig
from lakeline.project.settled import Settled
from lakeline.runtimes.embedded.event_flow import FlowReport
from lakeline.runtimes.embedded.project import LocalProject


def make_project(root: Path) -> LocalProject:
    (root / "deps").mkdir()
    (root / "deps" / "item.json").write_text('{"dataset": "a.b"}')
    (root / "queries").mkdir()
    (root / "tables.sql").write_text("CREATE DATABASE IF NOT EXISTS x;")
    raw = root / "incoming" / "shop" / "pos" / "sales" / "day=1"
    raw.mkdir(parents=True)
    (raw / "a.csv").write_text("store,amount\nn,1\n")
    (root / "lakeline.yml").write_text(
        "workspace: ws\nraw: incoming\ndependencies: [deps]\ntables: [tables.sql]\nqueries: queries\n"
    )
    return LocalProject(ProjectConfig.load(root / "lakeline.yml"), Console(quiet=True))


def test_only_a_clean_runs_record_of_the_same_files_and_inputs_means_nothing_new(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    keys = project.raw_keys()
    assert keys == ["shop/pos/sales/day=1/a.csv"]
    seen = project.snapshot(keys)
    assert not project.nothing_new(seen)  # no record yet
    project.conclude(seen, FlowReport())
    assert project.nothing_new(project.snapshot(project.raw_keys()))

    def changed() -> bool:
        fresh = make_fresh()
        return not fresh.nothing_new(fresh.snapshot(fresh.raw_keys()))

    def make_fresh() -> LocalProject:
        return LocalProject(ProjectConfig.load(tmp_path / "lakeline.yml"), project.console)

    raw = tmp_path / "incoming" / "shop" / "pos" / "sales" / "day=1"
    (raw / "a.csv").write_text("store,amount\nn,1\n")  # rewritten with the same bytes: no change
    assert not changed()
    edits = {
        "same size, new content": lambda: (raw / "a.csv").write_text("store,amount\nn,2\n"),
        "a new file": lambda: (raw / "b.csv").write_text("store,amount\ns,1\n"),
        "a file removed": lambda: (raw / "b.csv").unlink(),
        "an edited item": lambda: (tmp_path / "deps" / "item.json").write_text('{"dataset": "a.c"}'),
        "a new query": lambda: (tmp_path / "queries" / "new.sql").write_text("SELECT 1"),
        "another setting": lambda: (tmp_path / "lakeline.yml").write_text(
            "workspace: ws\nraw: incoming\nenvironment: prod\ndependencies: [deps]\ntables: [tables.sql]\n"
            "queries: queries\n"
        ),
    }
    for what, edit in edits.items():
        project.conclude(make_fresh().snapshot(make_fresh().raw_keys()), FlowReport())
        assert not changed()
        edit()
        assert changed(), what


def test_copies_a_clean_run_wrote_are_part_of_its_record(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    seen = project.snapshot(project.raw_keys())
    copy = "shop/pos/sales/day=1/a.lakeline-by-name.csv"
    (project.workspace.raw_dir / copy).write_text("amount,store\n1,n\n")
    project.conclude(seen, FlowReport(copies=[copy]))
    assert Settled.load(project.settled_file) is not None
    assert project.nothing_new(project.snapshot(project.raw_keys()))


def test_a_run_after_a_failed_one_is_not_nothing_new_until_the_failure_is_resolved(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    seen = project.snapshot(project.raw_keys())
    failure = "shop_reports_dev.daily/day=1: step 1 of 1 failed: boom"
    assert project.conclude(seen, FlowReport(failures=[failure])) == []
    assert not project.nothing_new(seen)
    # The rerun's files are duplicates and rebuild nothing: it is clean, but the target is still unbuilt.
    assert project.conclude(seen, FlowReport()) == [failure]
    assert not project.nothing_new(seen)
