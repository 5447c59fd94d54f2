"""The alarm on versions a quality check blocked (#41): on the metric the failure functions emit, read from the
synthesized template and compared with the EMF document the functions' emitter writes, so that a metric renamed,
moved to another namespace or given other dimensions on either side fails here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Template

from lakeline.quality.metrics import BLOCKED_VERSIONS, WARNINGS
from lambdas.quality_metrics import emit_quality_metric
from tests.infrastructure.test_stacks import resources, synthesized


def quality_alarm(template: Template) -> dict[str, Any]:
    (alarm,) = [
        dict(alarm["Properties"])
        for alarm in resources(template, "AWS::CloudWatch::Alarm").values()
        if alarm["Properties"].get("MetricName") == BLOCKED_VERSIONS
    ]
    return alarm


def emitted(capsys: pytest.CaptureFixture[str], name: str, value: int) -> list[dict[str, Any]]:
    capsys.readouterr()
    emit_quality_metric(name, value)
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]


@pytest.mark.parametrize("engine", ["athena", "spark"])
def test_one_blocked_version_in_a_period_alarms_the_alarm_topic(engine: str) -> None:
    template = synthesized(engine)[1]
    alarm = quality_alarm(template)
    assert alarm["Threshold"] == 1 and alarm["EvaluationPeriods"] == 1 and alarm["Period"] == 300
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold" and alarm["Statistic"] == "Sum"
    assert alarm["TreatMissingData"] == "notBreaching"
    (topic,) = resources(template, "AWS::SNS::Topic")
    assert alarm["AlarmActions"] == [{"Ref": topic}]


def test_the_alarm_watches_the_metric_the_failure_functions_emit(capsys: pytest.CaptureFixture[str]) -> None:
    alarm = quality_alarm(synthesized("athena")[1])
    (document,) = emitted(capsys, BLOCKED_VERSIONS, 1)
    (directive,) = document["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == alarm["Namespace"]
    assert [metric["Name"] for metric in directive["Metrics"]] == [alarm["MetricName"]]
    assert directive["Dimensions"] == [[dimension["Name"] for dimension in alarm["Dimensions"]]]
    assert {d["Name"]: document[d["Name"]] for d in alarm["Dimensions"]} == {
        d["Name"]: d["Value"] for d in alarm["Dimensions"]
    }
    assert document[BLOCKED_VERSIONS] == [1.0]


def test_warnings_share_the_namespace_and_dimensions_and_nothing_is_emitted_for_none(
    capsys: pytest.CaptureFixture[str],
) -> None:
    alarm = quality_alarm(synthesized("athena")[1])
    (document,) = emitted(capsys, WARNINGS, 3)
    (directive,) = document["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == alarm["Namespace"] and document[WARNINGS] == [3.0]
    assert directive["Dimensions"] == [[dimension["Name"] for dimension in alarm["Dimensions"]]]
    assert emitted(capsys, BLOCKED_VERSIONS, 0) == []
