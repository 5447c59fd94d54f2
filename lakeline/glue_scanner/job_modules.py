"""The job's own Python modules by import name: its extra .py files and the .py files inside its extra
zips. Apart from the evaluator that imports them: this reads files, once per job, before its script is
analysed."""

from __future__ import annotations

import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lakeline.errors import InvalidInputError


@dataclass(frozen=True)
class ModuleSource:
    """A Python module the script can import: from an extra .py file or inside an extra .zip."""

    name: str
    filename: str
    text: str


def module_sources(files: Iterable[Path]) -> dict[str, ModuleSource]:
    """Modules by import name: ``helpers.py`` is ``helpers``; ``pkg/mod.py`` in a zip is ``pkg.mod``."""
    modules: dict[str, ModuleSource] = {}
    for path in files:
        if path.suffix == ".py":
            modules[path.stem] = ModuleSource(path.stem, path.name, path.read_text(encoding="utf-8"))
            continue
        try:
            with zipfile.ZipFile(path) as archive:
                for member in archive.namelist():
                    if not member.endswith(".py"):
                        continue
                    parts = member[: -len(".py")].split("/")
                    if parts[-1] == "__init__":
                        parts = parts[:-1]
                    if not parts or not all(part.isidentifier() for part in parts):
                        continue
                    name = ".".join(parts)
                    text = archive.read(member).decode("utf-8", errors="replace")
                    modules[name] = ModuleSource(name, f"{path.name}/{member}", text)
        except (zipfile.BadZipFile, OSError) as error:
            raise InvalidInputError(f"cannot read {path} as a zip archive: {error}") from error
    return modules
