"""This tier runs the deployed functions' code in-process, as the handler tier does: their routers read the
table settings the CDK app bundles into the code asset, which the repository's own ``lambdas`` lacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.handlers.settings_file import use_table_settings


@pytest.fixture(autouse=True)
def _no_table_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What an app deployed without table settings bundles: the default for every table."""
    use_table_settings(monkeypatch, tmp_path, {})
