"""Powertools metrics from every function (#40): each handler module under ``lambdas/`` has one ``Metrics`` in the
``Lakeline`` namespace, flushed by ``log_metrics`` on its handler, and adds at least one metric of what it did."""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import boto3
import pytest
from aws_lambda_powertools import Metrics
from moto import mock_aws

from tests.handlers.test_lineage_support import REGION, LambdaContext, create_queue

LAMBDAS = Path(__file__).resolve().parents[2] / "lambdas"
HANDLERS = sorted(path.parent.name for path in LAMBDAS.glob("*/handler.py"))


@pytest.mark.parametrize("function", HANDLERS)
def test_every_function_emits_metrics_in_the_lakeline_namespace(function: str) -> None:
    module = importlib.import_module(f"lambdas.{function}.handler")
    metrics = getattr(module, "metrics", None)
    assert isinstance(metrics, Metrics), f"lambdas/{function}/handler.py has no module-level Metrics"
    assert metrics.namespace == "Lakeline"
    tree = ast.parse((LAMBDAS / function / "handler.py").read_text())
    (handler,) = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "handler"]
    decorators = [ast.unparse(decorator) for decorator in handler.decorator_list]
    assert "metrics.log_metrics" in decorators, f"{function}: its metrics are never flushed ({decorators})"
    added = [
        node for node in ast.walk(tree) if isinstance(node, ast.Call) and ast.unparse(node.func) == "metrics.add_metric"
    ]
    assert added, f"{function} adds no metric"


def test_a_function_s_metrics_reach_its_log_as_embedded_metric_format(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What CloudWatch reads: the invocation's EMF document on stdout, with what the function did."""
    from lambdas.lineage_input import handler

    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        monkeypatch.setenv("LINEAGE_QUEUE_URL", create_queue(sqs, "lineage"))
        monkeypatch.setenv("LINEAGE_TTL_HOURS", "48")
        handler.writer.cache_clear()
        try:
            request = {"root_id": "run-1", "parent_id": "run-1", "action_taken": "PROFILE_COMPLETE"}
            files = [{"storage_location": "s3://stage/a"}, {"storage_location": "s3://stage/b"}]
            handler.handler({"requests": [{**request, "records": files}]}, LambdaContext())
        finally:
            handler.writer.cache_clear()
    (line,) = [line for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    document = json.loads(line)
    assert document["LineageRecordsQueued"] == [2.0]  # one value, added once
    (directive,) = document["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "Lakeline" and document["service"] == "lineage-input"
