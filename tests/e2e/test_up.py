"""``lakeline up`` on a copy of ``examples/shop`` (one ``up`` for the module, on a fixed ``--port``), driven as a
user drives it from another terminal: the README's "Use it as in AWS" steps run by bash with the real ``aws`` CLI
(the ``awscli`` package) and pyathena, each step's output compared with the README's and the tables and the
lineage archive checked afterwards; the AWS CLI and boto3 on the stores file; ``status`` and ``sql`` reaching the
running deployment, ``run`` and a second ``up`` refused; ``lakeline down`` stopping it with its state kept. A
taken ``--port`` is refused before any stand-up."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pyathena
import pytest

from lakeline.dependencies.store import to_dynamodb
from lakeline.runtimes.deployed.local_aws.system import free_port

pytestmark = pytest.mark.spark

REPOSITORY = Path(__file__).resolve().parents[2]
STAND_UP_SECONDS = 600
PIPELINE_SECONDS = 180
STORES = "shop/pos/stores/stores.csv"
SECTION = "## Use it as in AWS"
SALES_BY_STORE = "shop_reports_dev.sales_by_store"
EDGE = {"source_table": {"S": "shop_pos_dev.sales"}, "target_dataset": {"S": SALES_BY_STORE}}
# What differs from one run to the next in the README's outputs: run folders, digests and ids.
VOLATILE = [
    (re.compile(r"lakeline_run=[0-9a-z_]+"), "lakeline_run=<run>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"-[0-9a-f]{40}\b"), "-<digest>"),
    (re.compile(r"dt=\d{4}-\d\d-\d\d"), "dt=<day>"),
    (re.compile(r"/part-\d+\.jsonl"), "/part-<bucket>.jsonl"),  # the archive object of the root (a hash)
    (re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+00:00"), "<time in UTC>"),
]


@dataclass(frozen=True)
class Up:
    project: Path
    process: subprocess.Popen[str]
    endpoint: dict[str, Any]
    log: Path

    @property
    def resources(self) -> dict[str, str]:
        return dict(self.endpoint["resources"])

    def exports(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint["url"],
            "AWS_REGION": self.endpoint["region"],
            "AWS_DEFAULT_REGION": self.endpoint["region"],
            "AWS_ACCESS_KEY_ID": self.endpoint["access_key_id"],
            "AWS_SECRET_ACCESS_KEY": self.endpoint["secret_access_key"],
        }

    def shell(self) -> dict[str, str]:
        """The user's second terminal: the exports and nothing else of AWS's (the tests' own keys taken out),
        the checkout's ``aws`` and ``python`` first on the PATH."""
        path = os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", "")))
        others = {name: value for name, value in _environment().items() if not name.startswith("AWS_")}
        return others | self.exports() | {"PATH": path}

    def client(self, service: str) -> Any:
        return boto3.client(
            service,  # type: ignore[call-overload]
            endpoint_url=self.endpoint["url"],
            region_name=self.endpoint["region"],
            aws_access_key_id=self.endpoint["access_key_id"],
            aws_secret_access_key=self.endpoint["secret_access_key"],
        )

    def athena(self, sql: str) -> list[tuple[Any, ...]]:
        connection = pyathena.connect(
            work_group=self.resources["athena_workgroup"],
            endpoint_url=self.endpoint["url"],
            region_name=self.endpoint["region"],
            aws_access_key_id=self.endpoint["access_key_id"],
            aws_secret_access_key=self.endpoint["secret_access_key"],
        )
        return [tuple(row) for row in connection.cursor().execute(sql).fetchall()]


def _environment(**extra: str) -> dict[str, str]:
    # The checkout under test first: an editable install elsewhere (another worktree) must not answer for it.
    path = os.pathsep.join(p for p in (str(REPOSITORY), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "COLUMNS": "200", "PYTHONPATH": path, **extra}


def _lakeline(*args: str) -> list[str]:
    return [sys.executable, "-m", "lakeline", *args]


def lakeline(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_lakeline(*args), cwd=cwd, env=_environment(), capture_output=True, text=True, timeout=300)


def _until(what: str, check: Any, timeout: float, process: subprocess.Popen[str] | None = None) -> Any:
    """``check()``'s first truthy answer, polled; fails after ``timeout`` seconds (or when ``process`` ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        if process is not None and process.poll() is not None:
            pytest.fail(f"lakeline up ended ({process.returncode}) before {what}")
        time.sleep(1)
    pytest.fail(f"no {what} within {timeout:.0f}s")


def _masked(text: str) -> list[str]:
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return [line.rstrip() for line in text.strip().splitlines()]


def readme_steps() -> list[tuple[str, str]]:
    """The README section's bash blocks, each with the text block after it (what it prints)."""
    section = (REPOSITORY / "README.md").read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    steps = re.findall(r"```bash\n(.*?)```\s*```text\n(.*?)```", section, flags=re.DOTALL)
    assert len(steps) == 3, section
    return [(str(script), str(printed)) for script, printed in steps]


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    # Laid out as the repository is: the README's query path (../../athena_queries) lands from the shop.
    root = tmp_path_factory.mktemp("up")
    project = root / "examples" / "shop"
    shutil.copytree(REPOSITORY / "examples" / "shop", project)
    (root / "athena_queries").symlink_to(REPOSITORY / "athena_queries")
    log = root / "up.log"
    port = free_port()
    with log.open("w") as output:
        process = subprocess.Popen(
            _lakeline("up", "--config", "lakeline.yml", "--port", str(port)),
            cwd=project,
            env=_environment(),
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
        )
    endpoint = project / ".lakeline" / "deployed" / "endpoint.json"
    try:
        _until("endpoint file", endpoint.is_file, STAND_UP_SECONDS, process)
        found = json.loads(endpoint.read_text())
        assert found["url"] == f"http://127.0.0.1:{port}"
        yield Up(project, process, found, log)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=PIPELINE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        print(log.read_text()[-5000:])


@pytest.fixture(scope="module")
def readme(up: Up) -> list[tuple[list[str], list[str]]]:
    """The README's steps run by bash in one session, in the shop, as the user's second terminal; each step's
    output and the README's, masked. The shop's dependency item is deleted first (and its edge with it, by
    the stream function): the README's ``put-item`` is then what routes the sales file to stage B."""
    dynamodb = up.client("dynamodb")
    dynamodb.delete_item(TableName=up.resources["dependencies"], Key={"dataset": {"S": SALES_BY_STORE}})
    edges = up.resources["dependencies_by_table"]
    _until("edge removed", lambda: "Item" not in dynamodb.get_item(TableName=edges, Key=EDGE), 30, up.process)
    steps = readme_steps()
    script = "set -e\n" + "".join(f"echo '@@step {index}'\n{block}" for index, (block, _) in enumerate(steps))
    ran = subprocess.run(
        ["bash", "-c", script],
        cwd=up.project,
        env=up.shell(),
        capture_output=True,
        text=True,
        timeout=2 * PIPELINE_SECONDS,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    printed = re.split(r"^@@step \d+\n", ran.stdout, flags=re.MULTILINE)[1:]
    print(ran.stdout)  # what to paste into the README when the steps change
    return [(_masked(got), _masked(shown)) for got, (_, shown) in zip(printed, steps, strict=True)]


def _sales_by_store(file: Path, day: str) -> list[tuple[str, int, float, str]]:
    totals: dict[str, tuple[int, float]] = {}
    with file.open(newline="") as handle:
        for row in csv.DictReader(handle):
            orders, amount = totals.get(row["store"], (0, 0.0))
            totals[row["store"]] = (orders + 1, amount + float(row["amount"]))
    return [(store, orders, round(amount, 2), day) for store, (orders, amount) in sorted(totals.items())]


def test_the_readme_puts_the_item_and_copies_the_sales_file(up: Up, readme: list[tuple[list[str], list[str]]]) -> None:
    got, shown = readme[0]
    assert got == shown
    resources = up.resources
    item = up.client("dynamodb").get_item(TableName=resources["dependencies"], Key={"dataset": {"S": SALES_BY_STORE}})
    project_item = json.loads((up.project / "dependencies" / "sales_by_store.json").read_text())
    assert item["Item"] == to_dynamodb(project_item)
    edge = up.client("dynamodb").get_item(TableName=resources["dependencies_by_table"], Key=EDGE)
    assert edge["Item"]["triggerMode"] == {"S": "any"}
    key = "shop/pos/sales/day=2024-03-01/sales.csv"
    body = up.client("s3").get_object(Bucket=resources["raw_bucket"], Key=key)["Body"].read()
    assert body == (up.project / "incoming" / key).read_bytes()


def test_the_readme_lists_the_executions_and_the_tables_hold_the_file(
    up: Up, readme: list[tuple[list[str], list[str]]]
) -> None:
    got, shown = readme[1]
    assert got == shown
    sales = up.project / "incoming" / "shop/pos/sales/day=2024-03-01/sales.csv"
    rows = up.athena("SELECT store, count(*) FROM shop_pos_dev.sales WHERE day = '2024-03-01' GROUP BY store")
    assert sorted(rows) == [(store, orders) for store, orders, _, _ in _sales_by_store(sales, "2024-03-01")]
    built = up.athena(f"SELECT store, orders, amount, day FROM {SALES_BY_STORE} ORDER BY store")
    assert built == _sales_by_store(sales, "2024-03-01")


def test_the_readme_queries_the_archived_lineage_with_pyathena(
    up: Up, readme: list[tuple[list[str], list[str]]]
) -> None:
    got, shown = readme[2]
    assert got == shown
    archive = up.client("s3").list_objects_v2(Bucket=up.resources["lineage_archive_bucket"], Prefix="archive/")
    (trace,) = [entry["Key"] for entry in archive["Contents"]]  # the staged trace folded, and deleted
    assert re.fullmatch(r"archive/dt=\d{4}-\d\d-\d\d/part-\d\.jsonl", trace), trace
    rows = up.athena(f"SELECT status FROM {up.resources['lineage_archive_table']}")
    assert rows == [("complete",)]


def test_the_printout_names_the_endpoint_s_own_queue_urls(up: Up) -> None:
    printed = up.log.read_text()
    for name, value in up.exports().items():
        assert f"export {name}={value}" in printed
    queues = {name: url for name, url in up.resources.items() if name.endswith(("_queue", "_dlq", "_follow_ups"))}
    assert len(queues) == 8
    for name, url in queues.items():
        assert f"  {name}: {url}" in printed
        assert url.startswith(f"{up.endpoint['url']}/"), url
    assert (
        'the AWS CLI v1 takes AWS_ENDPOINT_URL for every service but SQS: `aws sqs --endpoint-url "$AWS_ENDPOINT_URL"'
        in printed
    )
    # As the note says: the CLI's SQS gives the same URL given the endpoint.
    name = queues["stage_a_dlq"].rsplit("/", 1)[-1]
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "awscli",
            "sqs",
            "--endpoint-url",
            up.endpoint["url"],
            "get-queue-url",
            "--queue-name",
            name,
        ],
        env=up.shell(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert json.loads(ran.stdout)["QueueUrl"] == queues["stage_a_dlq"]


def test_the_aws_cli_boto3_and_pyathena_reach_the_running_deployment(up: Up) -> None:
    resources = up.resources

    def aws(*args: str) -> str:
        ran = subprocess.run(
            [sys.executable, "-m", "awscli", *args],
            cwd=up.project,
            env=up.shell(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ran.returncode == 0, ran.stderr[-3000:]
        return ran.stdout

    raw = up.project / "incoming" / STORES
    copied = aws("s3", "cp", f"incoming/{STORES}", f"s3://{resources['raw_bucket']}/{STORES}")
    assert f"upload: incoming/{STORES} to s3://{resources['raw_bucket']}/{STORES}" in copied

    def finished() -> list[dict[str, Any]]:
        machine = resources["stage_a_machine"]
        listed = json.loads(aws("stepfunctions", "list-executions", "--state-machine-arn", machine, "--output", "json"))
        stores = [entry for entry in listed["executions"] if entry["name"].startswith("pos-stores-")]
        return [entry for entry in stores if entry["status"] != "RUNNING"]

    (execution,) = _until("stage A execution", finished, PIPELINE_SECONDS, up.process)
    assert execution["status"] == "SUCCEEDED", execution

    athena = up.client("athena")
    query = athena.start_query_execution(
        QueryString="SELECT store, region FROM shop_pos_dev.stores ORDER BY store",
        WorkGroup=resources["athena_workgroup"],
    )["QueryExecutionId"]

    def state() -> str | None:
        status = athena.get_query_execution(QueryExecutionId=query)["QueryExecution"]["Status"]
        return None if status["State"] in ("QUEUED", "RUNNING") else str(status["State"])

    assert _until("query's end", state, PIPELINE_SECONDS) == "SUCCEEDED"
    rows = athena.get_query_results(QueryExecutionId=query)["ResultSet"]["Rows"]
    got = [[cell.get("VarCharValue") for cell in row["Data"]] for row in rows[1:]]
    lines = raw.read_text().splitlines()
    header = lines[0].split(",")
    expected = sorted(
        [line.split(",")[header.index("store")], line.split(",")[header.index("region")]] for line in lines[1:]
    )
    assert got == expected
    # pyathena, as the exports give it the endpoint (boto3 honours AWS_ENDPOINT_URL).
    with pytest.MonkeyPatch.context() as patch:
        for name in ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_PROFILE"):  # the tests' own: not the user's
            patch.delenv(name, raising=False)
        for name, value in up.exports().items():
            patch.setenv(name, value)
        cursor = pyathena.connect(work_group=resources["athena_workgroup"]).cursor()
        cursor.execute("SELECT store, region FROM shop_pos_dev.stores ORDER BY store")
        assert [list(row) for row in cursor.fetchall()] == expected


def test_status_and_sql_reach_the_running_deployment(up: Up, readme: list[tuple[list[str], list[str]]]) -> None:
    # The copy kept nothing before `up`: what status shows came through the endpoint.
    assert not (up.project / ".lakeline" / "deployed" / "state").exists()
    status = lakeline("status", "--format", "json", cwd=up.project)
    assert status.returncode == 0, status.stdout[-3000:] + status.stderr[-3000:]
    report = json.loads(status.stdout)
    assert (
        report["where"]
        == f"the local deployment kept up by `lakeline up` at {up.endpoint['url']} (pid {up.process.pid})"
    )
    partitions = {(part["table"], part["partition"]): part["version"] for part in report["partitions"]}
    assert partitions[("shop_pos_dev.sales", "day=2024-03-01")] == 1
    assert partitions[(SALES_BY_STORE, "day=2024-03-01")] == 1
    queried = lakeline("sql", "--format", "csv", "-q", f"SELECT count(*) AS n FROM {SALES_BY_STORE}", cwd=up.project)
    assert (queried.returncode, queried.stdout, queried.stderr) == (0, "n\n3\n", "")
    assert not (up.project / ".lakeline" / "state" / "sql-server.json").exists()  # no deployment of its own
    failed = lakeline("sql", "-q", "SELECT * FROM shop_pos_dev.nothing", cwd=up.project)
    assert failed.returncode == 1 and "Athena statement failed" in failed.stderr, failed.stderr
    # The checks column: the published version's report, read from the running deployment's S3.
    checks = {(part["table"], part["partition"]): part["quality"] for part in report["partitions"]}
    assert checks[("shop_pos_dev.sales", "day=2024-03-01")] == "3/3 passed"
    # `lakeline check` runs its queries through the running deployment's Athena, as `sql` does: no server of
    # its own; against what is published there (the file the README copied in).
    checked = lakeline("check", "--table", "shop_pos_dev.sales", "--partition", "day=2024-03-01", cwd=up.project)
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    assert checked.stdout.startswith("shop_pos_dev.sales (day=2024-03-01): 3/3 passed"), checked.stdout
    assert not (up.project / ".lakeline" / "state" / "sql-server.json").exists()


def test_run_and_a_second_up_are_refused_naming_the_running_one(up: Up) -> None:
    named = f"already up at {up.endpoint['url']} (`lakeline up`, pid {up.process.pid})"
    ran = lakeline("run", cwd=up.project)
    assert ran.returncode == 2, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert named in ran.stderr and "(`aws s3 cp`, `aws s3 sync`)" in ran.stderr and "`lakeline down`" in ran.stderr
    second = lakeline("up", "--config", "lakeline.yml", cwd=up.project)
    assert second.returncode == 2, second.stdout[-3000:] + second.stderr[-3000:]
    assert named in second.stderr


def test_down_stops_it_and_the_state_is_kept(up: Up, readme: list[tuple[list[str], list[str]]]) -> None:
    down = lakeline("down", cwd=up.project)
    assert down.returncode == 0, down.stdout[-3000:] + down.stderr[-3000:]
    state = up.project / ".lakeline" / "deployed" / "state"
    assert f"stopped `lakeline up` (pid {up.process.pid}); the deployment's state is kept in {state}" in down.stderr
    assert up.process.wait(timeout=30) == 0  # it had given the workspace up when `down` returned
    assert not (up.project / ".lakeline" / "deployed" / "endpoint.json").exists()
    assert "stopped; the deployment's state is kept in" in up.log.read_text()
    again = lakeline("down", "--workspace", str(up.project / ".lakeline"), cwd=up.project.parent)
    assert (again.returncode, again.stderr.strip()) == (
        0,
        f"no `lakeline up` runs on the workspace {up.project / '.lakeline'}",
    )
    status = lakeline("status", "--format", "json", cwd=up.project)
    report = json.loads(status.stdout)
    assert report["where"] == f"the local deployment kept in {state}"
    tables = {(part["table"], part["partition"]) for part in report["partitions"]}
    assert {("shop_pos_dev.sales", "day=2024-03-01"), (SALES_BY_STORE, "day=2024-03-01")} <= tables
    # The lineage that went through the endpoint (traced by the README's invoke) is in the workspace, as after
    # `run`: `lineage show` answers from it, and the picture was made.
    deployed = up.project / ".lakeline" / "deployed"
    assert f"lineage picture: {deployed / 'lineage.html'}" in up.log.read_text()
    assert (deployed / "lineage.html").exists() and (deployed / "lineage" / "openlineage.jsonl").stat().st_size
    shown = lakeline("lineage", "show", "--table", SALES_BY_STORE, "--partition", "day=2024-03-01", cwd=up.project)
    assert shown.returncode == 0, shown.stdout[-3000:] + shown.stderr[-3000:]
    assert "shop_pos_dev.sales v1." in shown.stdout, shown.stdout


def test_a_taken_port_is_refused_before_the_stand_up(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    shutil.copytree(REPOSITORY / "examples" / "shop", project)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        refused = lakeline("up", "--port", str(port), cwd=project)
    assert refused.returncode == 2, refused.stdout[-3000:] + refused.stderr[-3000:]
    assert f"error: port {port} is taken on 127.0.0.1" in refused.stderr
    assert time.monotonic() - started < 60 and not (project / ".lakeline" / "deployed").exists()
