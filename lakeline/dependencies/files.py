"""Dependency items from JSON files: one item (an object) or several (an array) per file."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from lakeline.dependencies.model import DependencyItem, DependencyItemError, parse_dependency_item


def load_items_file(path: Path) -> list[DependencyItem]:
    """Every item in ``path``; every problem of every item is listed in one ``DependencyItemError``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise DependencyItemError(str(path), [f"cannot read the file: {error.strerror}"]) from error
    except json.JSONDecodeError as error:
        raise DependencyItemError(str(path), [f"{path} is not JSON: {error}"]) from error
    documents = data if isinstance(data, list) else [data]
    if not documents:
        raise DependencyItemError(str(path), ["the file holds no dependency item"])
    items: list[DependencyItem] = []
    problems: list[str] = []
    for index, document in enumerate(documents):
        # Each line names the item: its position in a list, and its dataset as written.
        dataset = document.get("dataset") if isinstance(document, dict) else None
        name = dataset if isinstance(dataset, str) else "(no dataset)"
        label = f"[{index}] {name}: " if isinstance(data, list) else f"{name}: "
        try:
            items.append(parse_dependency_item(document))
        except DependencyItemError as error:
            problems.extend(f"{label}{problem}" for problem in error.problems)
    if problems:
        raise DependencyItemError(f"{path}: invalid dependency item", problems)
    return items


def load_items(paths: Iterable[Path]) -> list[DependencyItem]:
    """Items of several files or folders (every ``*.json`` in a folder), in a stable order."""
    items: list[DependencyItem] = []
    for path in paths:
        files = sorted(path.glob("*.json")) if path.is_dir() else [path]
        for file in files:
            items.extend(load_items_file(file))
    return items
