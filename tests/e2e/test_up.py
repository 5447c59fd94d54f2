"""``lakeline up`` on a copy of ``examples/shop``, driven as a user drives it from another terminal: the AWS CLI
(the ``awscli`` package) puts a raw file into the raw bucket and lists the stage A executions, boto3 and pyathena
query the stage table through the endpoint's Athena (docs/endpoint.md); a second ``up`` is refused naming the
first; Ctrl-C (SIGINT) stops it with exit 0, keeps the state and removes the endpoint file."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pyathena
import pytest

pytestmark = pytest.mark.spark

REPOSITORY = Path(__file__).resolve().parents[2]
STAND_UP_SECONDS = 600
PIPELINE_SECONDS = 180
STORES = "shop/pos/stores/stores.csv"


def _environment(**extra: str) -> dict[str, str]:
    # The checkout under test first: an editable install elsewhere (another worktree) must not answer for it.
    path = os.pathsep.join(p for p in (str(REPOSITORY), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "COLUMNS": "200", "PYTHONPATH": path, **extra}


def _lakeline(*args: str) -> list[str]:
    return [sys.executable, "-m", "lakeline", *args]


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


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, subprocess.Popen[str], dict[str, Any]]]:
    project = tmp_path_factory.mktemp("up") / "shop"
    shutil.copytree(REPOSITORY / "examples" / "shop", project)
    log = project.parent / "up.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            _lakeline("up", "--config", "lakeline.yml"),
            cwd=project,
            env=_environment(),
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
        )
    endpoint = project / ".lakeline" / "deployed" / "endpoint.json"
    try:
        _until("endpoint file", endpoint.is_file, STAND_UP_SECONDS, process)
        yield project, process, json.loads(endpoint.read_text())
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=PIPELINE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        print(log.read_text()[-5000:])


def test_a_user_drives_the_running_deployment_with_the_aws_cli_and_boto3(
    up: tuple[Path, subprocess.Popen[str], dict[str, Any]],
) -> None:
    project, process, endpoint = up
    assert endpoint["pid"] == process.pid
    resources = endpoint["resources"]
    exports = {
        "AWS_ENDPOINT_URL": endpoint["url"],
        "AWS_REGION": endpoint["region"],
        "AWS_DEFAULT_REGION": endpoint["region"],
        "AWS_ACCESS_KEY_ID": endpoint["access_key_id"],
        "AWS_SECRET_ACCESS_KEY": endpoint["secret_access_key"],
    }
    printed = (project.parent / "up.log").read_text()
    for name, value in exports.items():
        assert f"export {name}={value}" in printed
    # As the user's shell has them: the exports and nothing else of AWS's (the tests' own keys taken out).
    shell = {name: value for name, value in _environment().items() if not name.startswith("AWS_")} | exports

    def aws(*args: str) -> str:
        ran = subprocess.run(
            [sys.executable, "-m", "awscli", *args],
            cwd=project,
            env=shell,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ran.returncode == 0, ran.stderr[-3000:]
        return ran.stdout

    raw = project / "incoming" / STORES
    copied = aws("s3", "cp", f"incoming/{STORES}", f"s3://{resources['raw_bucket']}/{STORES}")
    assert f"upload: incoming/{STORES} to s3://{resources['raw_bucket']}/{STORES}" in copied

    def finished() -> list[dict[str, Any]]:
        machine = resources["stage_a_machine"]
        listed = json.loads(aws("stepfunctions", "list-executions", "--state-machine-arn", machine, "--output", "json"))
        return [entry for entry in listed["executions"] if entry["status"] != "RUNNING"]

    (execution,) = _until("stage A execution", finished, PIPELINE_SECONDS, process)
    assert execution["status"] == "SUCCEEDED", execution
    assert execution["name"].startswith("pos-stores-")

    athena = boto3.client(
        "athena",
        endpoint_url=endpoint["url"],
        region_name=endpoint["region"],
        aws_access_key_id=endpoint["access_key_id"],
        aws_secret_access_key=endpoint["secret_access_key"],
    )
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
        for name, value in exports.items():
            patch.setenv(name, value)
        cursor = pyathena.connect(work_group=resources["athena_workgroup"]).cursor()
        cursor.execute("SELECT store, region FROM shop_pos_dev.stores ORDER BY store")
        assert [list(row) for row in cursor.fetchall()] == expected

    # A second `up` on the same workspace is refused at once, naming the first.
    second = subprocess.run(
        _lakeline("up", "--config", "lakeline.yml"),
        cwd=project,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 2, second.stdout[-3000:] + second.stderr[-3000:]
    assert f"already up at {endpoint['url']} (`lakeline up`, pid {process.pid})" in second.stderr

    # Ctrl-C: the work ends, the state is kept, the endpoint file goes, exit 0.
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=PIPELINE_SECONDS) == 0
    deployed = project / ".lakeline" / "deployed"
    assert not (deployed / "endpoint.json").exists()
    assert (deployed / "state").is_dir()
    assert "stopped; the deployment's state is kept in" in (project.parent / "up.log").read_text()
