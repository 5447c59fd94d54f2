"""The seed's dependency item (tests/fixtures/dependencies/seed_item.json), changed for a test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SEED_ITEM = Path(__file__).parent / "fixtures" / "dependencies" / "seed_item.json"
SEED_TARGET = "engineering_analytics_dev.destination_table"


def seed_item(**changes: Any) -> dict[str, Any]:
    """The seed item with ``changes``; its step writes the item's dataset, as a step must."""
    data: dict[str, Any] = json.loads(SEED_ITEM.read_text())
    data.update(changes)
    for step in data.get("steps") or []:
        if isinstance(step, dict) and isinstance(step.get("sql"), str) and isinstance(data.get("dataset"), str):
            step["sql"] = step["sql"].replace(SEED_TARGET, data["dataset"])
    return data
