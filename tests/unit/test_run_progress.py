"""``lakeline run`` on a terminal shows a bar of the arrivals taken so far under its run lines; in a
pipe or a log it prints the run lines alone."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from lakeline.project.config import ProjectConfig
from lakeline.runtimes.embedded.event_flow import FlowReport
from lakeline.runtimes.embedded.project import LocalProject, ProgressMark


def project(tmp_path: Path, terminal: bool) -> tuple[LocalProject, io.StringIO]:
    output = io.StringIO()
    console = Console(file=output, force_terminal=terminal, width=160, log_path=False)
    return LocalProject(ProjectConfig(workspace=tmp_path / "ws"), console), output


def test_a_terminal_gets_a_bar_of_the_arrivals_taken(tmp_path: Path) -> None:
    local, output = project(tmp_path, terminal=True)
    report = FlowReport(arrived=5, settled=5)  # an earlier round's arrivals do not count
    before = ProgressMark.of(report)
    report.arrived += 4
    with local._showing_progress(report, before):
        report.settled += 3  # a run that took three arrivals
        local._progress("stage A", "shop_pos_dev.sales {'day': '2024-03-01'}")
    shown = output.getvalue()
    assert "stage A: shop_pos_dev.sales" in shown
    assert "arrivals" in shown and "3/4" in shown and "stage B runs 0" in shown
    assert local._bar is None


def test_a_pipe_gets_the_run_lines_alone(tmp_path: Path) -> None:
    local, output = project(tmp_path, terminal=False)
    report = FlowReport(arrived=2)
    with local._showing_progress(report, ProgressMark(0, 0, 0)):
        report.settled += 2
        local._progress("stage A", "shop_pos_dev.sales {}")
    assert output.getvalue().strip().endswith("stage A: shop_pos_dev.sales {}")
    assert "arrivals" not in output.getvalue()


def test_the_summary_table_keeps_every_name_whole_in_a_pipe(tmp_path: Path) -> None:
    from lakeline.project.workspace import Workspace
    from lakeline.runtimes.embedded.project import ProjectRun, print_summary

    output = io.StringIO()
    name = "engineering_analytics_dev.customers_by_country_and_segment"
    row = {"table": name, "partition": "date=20220118", "rows": 6, "files": 1}
    run = ProjectRun(Workspace(tmp_path / "ws"), FlowReport(), tables=[row])
    print_summary(run, Console(file=output, width=80, log_path=False))
    assert name in output.getvalue() and "…" not in output.getvalue()
