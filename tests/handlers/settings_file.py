"""The routers' table settings in the handler tier: a file as the CDK app bundles it into the code asset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lambdas.table_settings import deployed_table_settings
from stacks.constructs.bundling import settings_document


def use_table_settings(monkeypatch: pytest.MonkeyPatch, folder: Path, tables: dict[str, Any]) -> None:
    """The routers read ``tables`` as deployed: the document the CDK app bundles into the code asset
    (``stacks.constructs.bundling``), here in a file of ``folder`` that ``TABLE_SETTINGS_FILE`` names, since the
    repository's own ``lambdas`` has none."""
    path = folder / "table_settings.json"
    path.write_text(settings_document(tables, {}))
    monkeypatch.setenv("TABLE_SETTINGS_FILE", str(path))
    deployed_table_settings.cache_clear()
