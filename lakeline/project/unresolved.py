"""Failures that outlive their run: a failed target stays unbuilt until something rebuilds it.

A file whose stage B target failed (a step's SQL, a target that could not be routed) is loaded; when
the run is repeated the file is a duplicate and routes nothing, so the target would stay unbuilt with
every later run reporting "failed: 0". So a run's failures are kept in the workspace
(``state/unresolved.json``) and each later run keeps those it did not resolve: a stage A failure is
resolved when its files load, a stage B one when its target partition is built (a re-sent file, or
``lakeline stage-b run``), an unrouted target when any of its partitions is. While any remain, a run
says so and exits 1, and ``lakeline run`` does not answer "nothing new" from its record.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

from lakeline.project.workspace import write_json


def unresolved_file(workspace: Path) -> Path:
    return workspace / "state" / "unresolved.json"


def load_unresolved(workspace: Path) -> list[str]:
    try:
        return [str(failure) for failure in json.loads(unresolved_file(workspace).read_text())]
    except (OSError, ValueError, TypeError):
        return []


def resolved_by(failure: str, loaded: Collection[str], built: Collection[str]) -> bool:
    """Whether a failure (``<subject>: <reason>``, as runs report them) is resolved by a run that loaded
    the raw keys ``loaded`` and built the target partitions ``built`` (``db.table/col=value``)."""
    subject = failure.split(": ", 1)[0]
    if " → " in subject:  # an unrouted target: "<trigger node> → <target dataset>"
        target = subject.split(" → ", 1)[1]
        return any(node.split("/", 1)[0] == target for node in built)
    return subject in built or all(key in loaded for key in subject.split(", "))


def carry_unresolved(
    workspace: Path, failures: list[str], loaded: Collection[str], built: Collection[str]
) -> list[str]:
    """Keep this run's ``failures`` and the earlier ones it did not resolve; return the earlier ones."""
    earlier = [failure for failure in load_unresolved(workspace) if not resolved_by(failure, loaded, built)]
    path = unresolved_file(workspace)
    kept = list(dict.fromkeys([*earlier, *failures]))
    if kept:
        write_json(path, kept)
    else:
        path.unlink(missing_ok=True)
    return [failure for failure in earlier if failure not in failures]
