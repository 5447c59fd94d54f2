"""A rerun with nothing to do, answered without starting Spark.

After a run that loaded everything (nothing failed, nothing quarantined, no earlier failure left
open: ``lakeline.project.unresolved``), ``lakeline run`` records what
that run saw: a digest of the project's inputs (its settings, dependency items, table DDL and queries,
and Lakeline's own code) and the content digest of every raw file it processed, as well as of the
copies it wrote (``stage_a.by_name``). The next run compares the raw folder and the inputs with that
record first: if nothing changed, every arrival would be a duplicate, and the run says so in seconds
instead of starting Spark to find out. Anything new or changed, a file removed, an edited item or
query, or a missing record means a full run, which removes the record first and writes it again only
if it ends clean. The digests are of contents (as the local flow's arrivals are), so a file rewritten
with the same bytes is no change and one rewritten with the same size and time is.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lakeline.project.workspace import write_json

_CODE_PACKAGES = ("lakeline", "stage_a", "stage_b", "stage_lineage", "stage_end", "lambdas")
_CHUNK = 1024 * 1024


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def inputs_digest(settings_json: str, paths: Iterable[Path]) -> str:
    """The project's settings and the contents of every file under ``paths`` (files or folders), with
    Lakeline's own source files: a change to any of them may change what a run writes."""
    digest = hashlib.sha256(settings_json.encode())
    sources = [package_folder(package) for package in _CODE_PACKAGES]
    for base in [*paths, *sources]:
        files = sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else [base]
        for path in files:
            if "__pycache__" in path.parts:
                continue
            digest.update(str(path).encode())
            digest.update(file_digest(path).encode() if path.is_file() else b"-")
    return digest.hexdigest()


def package_folder(package: str) -> Path:
    """Where the installed ``package`` is (its spec: nothing of it is imported), wherever it was installed."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise LookupError(f"{package} is not an installed package")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


@dataclass(frozen=True)
class Settled:
    """What a clean run processed: the inputs' digest and each raw key's content digest."""

    inputs: str
    files: dict[str, str]

    @classmethod
    def load(cls, path: Path) -> Settled | None:
        try:
            data = json.loads(path.read_text())
            return cls(str(data["inputs"]), {str(k): str(v) for k, v in dict(data["files"]).items()})
        except (OSError, ValueError, KeyError, TypeError):
            return None  # no record (or one this version cannot read): a full run

    def save(self, path: Path) -> None:
        write_json(path, {"inputs": self.inputs, "files": self.files}, sort_keys=True)

    @staticmethod
    def forget(path: Path) -> None:
        path.unlink(missing_ok=True)
