"""The README's "Your own folders" commands of the embedded runtime, run as shown on ``examples/shop`` (a copy
of it), checked against figures computed here from the example's CSV files (its commands on the local
deployment: ``test_deployed_shop.py``)."""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "shop"


def readme_block(first: str) -> list[list[str]]:
    """The lines of the README's bash block whose first line starts with ``first``, split as a shell would
    (comments dropped); a ``cd`` line is kept."""
    readme = (ROOT / "README.md").read_text()
    for block in re.findall(r"```bash\n(.*?)```", readme, flags=re.DOTALL):
        lines = [line.split("  #")[0].strip() for line in block.splitlines()]
        if lines and lines[0].startswith(first):
            return [shlex.split(line) for line in lines if line]
    raise AssertionError(f"the README has no bash block starting with {first!r}")


# The shop's two blocks: on the local deployment (`tests/e2e/test_deployed_shop.py` runs it), and embedded.
DEPLOYED_BLOCK = "cd examples/shop"
EMBEDDED_BLOCK = "lakeline run --config lakeline.yml --embedded"


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    assert command[0] == "lakeline"
    return subprocess.run(
        [sys.executable, "-m", "lakeline", *command[1:]],
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=900,
    )


def expected_sales_by_store(project: Path) -> list[tuple[str, int, float, str]]:
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    for path in sorted((project / "incoming/shop/pos/sales").glob("day=*/*.csv")):
        day = path.parent.name.removeprefix("day=")
        with path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                totals[(day, row["store"])][0] += 1
                totals[(day, row["store"])][1] += float(row["amount"])
    return [(store, int(n), round(amount, 2), day) for (day, store), (n, amount) in sorted(totals.items())]


def table_rows(output: str) -> list[list[str]]:
    """The body rows of the table ``lakeline sql`` prints."""
    rows = [line for line in output.splitlines() if line.startswith("│")]
    return [[cell.strip() for cell in row.strip("│").split("│")] for row in rows]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    copy = tmp_path_factory.mktemp("example") / "shop"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns(".lakeline"))
    yield copy
    run(["lakeline", "sql", "--config", "lakeline.yml", "--stop"], copy)  # the README's `sql` started one


def test_the_readme_shows_run_status_and_sql_then_the_same_embedded() -> None:
    assert [command[:2] for command in readme_block(DEPLOYED_BLOCK)] == [
        ["cd", "examples/shop"],
        ["lakeline", "run"],
        ["lakeline", "status"],
        ["lakeline", "sql"],
    ]
    embedded = readme_block(EMBEDDED_BLOCK)
    assert [command[:2] for command in embedded] == [["lakeline", "run"], ["lakeline", "watch"], ["lakeline", "sql"]]
    assert "--embedded" in embedded[0] and "--embedded" in embedded[1]
    # The configuration the README shows is the example's, word for word.
    readme = (ROOT / "README.md").read_text()
    assert (EXAMPLE / "lakeline.yml").read_text() in readme


def test_the_readme_embedded_commands_work_as_shown_on_the_example(project: Path) -> None:
    run_command, watch_command, sql_command = readme_block(EMBEDDED_BLOCK)

    result = run(run_command, project)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "stage A runs: 5, stage B runs: 4" in result.stdout
    # Readable in a pipe: one progress line per run, whole, without the source line that printed it.
    assert "project.py:" not in result.stdout
    assert any(line.endswith("stage A: shop_pos_dev.stores {}") for line in result.stdout.splitlines())
    summary = json.loads((project / ".lakeline" / "summary.json").read_text())
    # The unpartitioned store list: one line for the whole table.
    assert {"table": "shop_pos_dev.stores", "partition": "", "rows": 4, "files": 1} in summary["tables"]

    # watch runs until Ctrl-C: here for a few seconds, over a workspace with nothing new to do.
    result = run([*watch_command, "--duration", "3"], project)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "watching" in result.stdout

    result = run(sql_command, project)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [(store, int(n), float(amount), day) for store, n, amount, day in table_rows(result.stdout)]
    assert rows == expected_sales_by_store(project)
    assert len(rows) == 7


def server_pid(project: Path) -> int:
    return int(json.loads((project / ".lakeline" / "state" / "sql-server.json").read_text())["pid"])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sql_keeps_spark_running_between_calls_until_another_command_needs_the_workspace(project: Path) -> None:
    count = [
        "lakeline",
        "sql",
        "--config",
        "lakeline.yml",
        "-q",
        "SELECT count(*) AS n FROM shop_reports_dev.sales_by_store",
    ]
    first = run([*count, "--format", "csv"], project)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stdout == "n\n7\n"
    pid = server_pid(project)
    # The next call is answered by the same server: Spark does not start again.
    second = run([*count, "--format", "json"], project)
    assert (second.returncode, json.loads(second.stdout), server_pid(project)) == (0, [{"n": 7}], pid)
    # From another folder, naming only the workspace; the SQL parser's warning on a statement it does not model
    # goes to the workspace's log, not the terminal.
    elsewhere = project.parent / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    shown = run(["lakeline", "sql", "--workspace", str(project / ".lakeline"), "-q", "SHOW DATABASES"], elsewhere)
    # The embedded Spark refuses the statement (its own one-line error), the parser's warning is not on stderr.
    assert (shown.returncode, server_pid(project)) == (1, pid), shown.stderr
    assert shown.stderr == "error: statement is not supported on Spark: SHOW DATABASES\n"
    log = (project / ".lakeline" / "state" / "lakeline.log").read_text()
    assert "WARNING sqlglot: 'SHOW DATABASES' contains unsupported syntax" in log
    # `lakeline status` says it runs, and how it ends.
    shown = run(["lakeline", "status", "--config", "lakeline.yml", "--format", "json"], project)
    assert f"running as pid {pid}" in json.loads(shown.stdout)["sql_server"], shown.stdout[-2000:]
    # A failed statement is one line, and the server stays for the next.
    failed = run(["lakeline", "sql", "--config", "lakeline.yml", "-q", "SELECT nope FROM shop_pos_dev.sales"], project)
    assert failed.returncode == 1 and "UNRESOLVED_COLUMN" in failed.stderr and len(failed.stderr.splitlines()) == 1
    assert alive(pid)
    # The local deployment was never run here: said in one line, and the embedded server stays.
    deployed = run([*count, "--deployed"], project)
    assert deployed.returncode == 2 and "no local deployment is kept in" in deployed.stderr, deployed.stderr
    assert alive(pid)

    # Another command on the workspace (here one that opens its own Spark) stops the server and says so.
    own = run(["lakeline", "sql", "--config", "lakeline.yml", "--no-server", "-q", "SELECT 1 AS one"], project)
    assert own.returncode == 0, own.stderr[-3000:]
    assert "stopped the workspace's SQL server" in own.stderr
    assert not alive(pid)

    again = run([*count, "--format", "csv"], project)
    assert again.stdout == "n\n7\n" and server_pid(project) != pid
    stopped = run(["lakeline", "sql", "--config", "lakeline.yml", "--stop"], project)
    assert stopped.returncode == 0 and "SQL server stopped" in stopped.stderr
    assert not (project / ".lakeline" / "state" / "sql-server.json").exists()
