"""A dependency item put straight into the running deployment's dependencies table with the AWS CLI, bypassing
``lakeline deps`` (#42): an invalid one is refused by the stream function and parked with its reason in the stream's
failure queue, which ``lakeline dlq list`` shows (reaching the running deployment's stack through the endpoint, and
from the state ``up`` kept once stopped); a valid one put after it is routed, nothing held behind the refused one.
IAM is enforced on the endpoint: the function parks with its own role's grant."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Any

import pytest

from lakeline.runtimes.deployed.endpoint import RunningEndpoint
from tests.e2e import test_up as up_session

pytestmark = pytest.mark.spark

up = up_session.up  # `lakeline up` on a copy of examples/shop, stopped at the end if the test did not stop it
PIPELINE_STACK = "Lakeline-dev-Pipeline"
SALES = "shop_pos_dev.sales"


def _item(dataset: str, **changes: Any) -> dict[str, Any]:
    """The shop's dependency item under another key, in DynamoDB JSON as `aws dynamodb put-item` takes it."""
    from boto3.dynamodb.types import TypeSerializer

    item = json.loads((up_session.REPOSITORY / "examples/shop/dependencies/sales_by_store.json").read_text())
    serializer = TypeSerializer()
    return {key: serializer.serialize(value) for key, value in {**item, "dataset": dataset, **changes}.items()}


def test_an_invalid_item_put_with_the_aws_cli_is_parked_with_its_reason_and_the_next_is_routed(
    up: up_session.Up,
) -> None:
    project, process, endpoint = up.project, up.process, up.endpoint
    resources = endpoint["resources"]
    exports = RunningEndpoint(**endpoint).exports()  # as `up` prints them (tests/e2e/test_up.py checks the printout)
    shell = {name: value for name, value in up_session._environment().items() if not name.startswith("AWS_")} | exports

    def run(command: list[str], *, expect: int = 0) -> str:
        ran = subprocess.run(command, cwd=project, env=shell, capture_output=True, text=True, timeout=300)
        assert ran.returncode == expect, ran.stdout[-3000:] + ran.stderr[-3000:]
        return ran.stdout

    def put_item(item: dict[str, Any]) -> None:
        path = project.parent / "item.json"
        path.write_text(json.dumps(item))
        table = resources["dependencies"]
        run([sys.executable, "-m", "awscli", "dynamodb", "put-item", "--table-name", table, "--item", f"file://{path}"])

    put_item(_item("shop_reports_dev.refused", partitionColumn="Not Valid"))
    put_item(_item("shop_reports_dev.after_refused"))

    # the put returns once the stream function has taken the record (the endpoint delivers it with the request)
    scanned = json.loads(
        run([sys.executable, "-m", "awscli", "dynamodb", "scan", "--table-name", resources["dependencies_by_table"]])
    )
    routed = {(item["source_table"]["S"], item["target_dataset"]["S"]) for item in scanned["Items"]}
    assert (SALES, "shop_reports_dev.after_refused") in routed
    assert (SALES, "shop_reports_dev.refused") not in routed

    listed = run(
        up_session._lakeline("dlq", "list", "--stack", PIPELINE_STACK, "--queue", "dependencies-stream"), expect=1
    )
    print(listed)  # docs/endpoint.md shows it
    assert "dependencies-stream: 1 parked" in listed, listed
    assert "dependency item 'shop_reports_dev.refused'" in listed and "partitionColumn" in listed, listed
    assert '"dataset":"shop_reports_dev.refused","event_name":"INSERT"' in listed, listed
    assert "put a corrected item under the key named" in listed, listed
    # From the project's folder, as `status` does, the listing reaches the running deployment (not what was kept).
    running = run(up_session._lakeline("dlq", "list", "--config", "lakeline.yml"), expect=1)
    assert "kept up by `lakeline up` at" in running, running
    assert "dependencies-stream: 1 parked" in running and "dependency item 'shop_reports_dev.refused'" in running

    # Stopped, the state is kept with the parked message: the listing from the workspace shows it too.
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=up_session.PIPELINE_SECONDS) == 0
    kept = run(
        up_session._lakeline("dlq", "list", "--config", "lakeline.yml", "--queue", "dependencies-stream"), expect=1
    )
    assert "dependencies-stream: 1 parked" in kept and "dependency item 'shop_reports_dev.refused'" in kept, kept
