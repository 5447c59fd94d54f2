"""The handler tier runs the deployed functions' code on moto: what it calls is what their roles need."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.aws_calls import CallRecorder
from tests.handlers.settings_file import use_table_settings


@pytest.fixture(autouse=True)
def _no_table_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What an app deployed without table settings bundles: the default for every table."""
    use_table_settings(monkeypatch, tmp_path, {})


@pytest.fixture(autouse=True)
def _handler_calls_recorded(aws_calls: CallRecorder) -> None:
    aws_calls.handler_tests_ran = True
