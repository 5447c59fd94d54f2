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


def item_files(paths: Iterable[Path]) -> list[Path]:
    """The files of ``paths``: a file as given, a folder's ``*.json`` files (not its subfolders) sorted."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.glob("*.json"))
            if not found:
                raise DependencyItemError(str(path), ["the folder holds no *.json file"])
            files.extend(found)
        else:
            files.append(path)
    return files


def load_items(paths: Iterable[Path]) -> list[DependencyItem]:
    """Items of several files or folders (every ``*.json`` in a folder), in a stable order. Every problem
    of every file is listed in one ``DependencyItemError``, as is a dataset defined twice."""
    items: list[DependencyItem] = []
    problems: list[str] = []
    defined: dict[str, Path] = {}
    files = item_files(paths)
    for file in files:
        try:
            found = load_items_file(file)
        except DependencyItemError as error:
            if len(files) == 1:
                raise  # it names its file already
            problems.extend(f"{file}: {problem}" for problem in error.problems)
            continue
        for item in found:
            if item.dataset in defined:
                problems.append(f"{file}: {item.dataset} is defined in {defined[item.dataset]} already")
            defined.setdefault(item.dataset, file)
        items.extend(found)
    if problems:
        raise DependencyItemError("invalid dependency items", problems)
    return items
