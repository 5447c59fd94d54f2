"""The handler tier runs the deployed functions' code on moto: what it calls is what their roles need."""

from __future__ import annotations

import pytest

from harness.aws_calls import CallRecorder


@pytest.fixture(autouse=True)
def _handler_calls_recorded(aws_calls: CallRecorder) -> None:
    aws_calls.handler_tests_ran = True
