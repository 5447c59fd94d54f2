"""A full disk, recognised in one place (#37).

A write that finds no space arrives in many forms: ``OSError`` errno 28 from Python's own writes, a
Spark or Py4J exception whose Java message says ``No space left on device``, a Derby error saying the
disk may be full (its metastore cannot write a page or its log). Every one of them means the same
thing: nothing written from here on can be trusted to be whole, and every later write fails too (the
Derby metastore even turns read-only, and each later statement then fails slowly). So the run stops at
the first one with ``DiskFull``, instead of failing each remaining file in turn.
"""

from __future__ import annotations

import errno
import re
import shutil
from pathlib import Path

from lakeline.errors import LakelineError

# The words each layer uses: the C library (through Java or Python), Derby (XSDG1: "... could not be
# written to disk, please check if the disk is full ..."), and a quota, which is a full disk to the user.
_FULL = re.compile(r"No space left on device|Disk quota exceeded|check if the disk is full|\bXSDG1\b", re.IGNORECASE)
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# A path in a Java message: ``file:/x/y`` or ``file:///x/y``; else an absolute path before ": No space".
_PATH = re.compile(r"file:/+(?P<uri>[^\s'\"]+)|(?P<path>/[^\s'\":]+)(?= \(No space left on device\)|: No space)")


class DiskFull(LakelineError):
    """The workspace's disk is full: the run stopped at the first write that failed."""


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and the exceptions behind it (``raise ... from``, or raised while handling)."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain and len(chain) < 20:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def full_disk(error: BaseException, workspace: Path) -> DiskFull | None:
    """``DiskFull`` naming the path that could not be written and the free space left, if ``error`` (or
    one behind it) is a write that found the disk full; ``None`` otherwise."""
    if isinstance(error, DiskFull):
        return error
    path: str | None = None
    found = False
    for each in _chain(error):
        if isinstance(each, OSError) and each.errno in _FULL_ERRNOS:
            found = True
            path = path or (str(each.filename) if each.filename else None)
            continue
        text = str(each)
        if _FULL.search(text):
            found = True
            if path is None and (named := _PATH.search(text)):
                path = "/" + named["uri"].rstrip(".,;)/") if named["uri"] else named["path"]
    if not found:
        return None
    return DiskFull(
        f"the disk is full: writing {path or workspace} failed (no space left on the device), "
        f"{_free(workspace)} free on the file system of {workspace}. The run stopped at that write; the pipeline "
        "state is kept as it was before the run. Free some space and run again: the next run loads what this "
        "one did not"
    )


def _free(workspace: Path) -> str:
    """The space left where the workspace is, in words."""
    try:
        free = float(shutil.disk_usage(workspace).free)
    except OSError:
        return "unknown space"
    unit = "bytes"
    for larger in ("KB", "MB", "GB"):
        if free < 1024:
            break
        free, unit = free / 1024, larger
    return f"{free:.0f} bytes" if unit == "bytes" else f"{free:.1f} {unit}"
