"""Fixtures the unit tests share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.lineage_endpoint import recording_endpoint


@pytest.fixture
def lineage_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A local stand-in for Marquez (or DataZone's endpoint) on 127.0.0.1 (``tests.lineage_endpoint``)."""
    with recording_endpoint() as endpoint:
        yield endpoint
