"""A partition version's token: what the lineage (records, archive, OpenLineage ``version`` facets) calls it.

    v<version>.<run token>        e.g. v3.20220120t101500123456_1a2b3c4d5e

``version`` is the partition's commit counter (``lakeline status`` shows it); the run token is the run that
committed it (its prefix, ``lakeline_run=<token>/``, holds the version's files). Each committed version is
written by one run (compare-and-swap on ``version`` under the run's lease), so the pair names one version of
one partition, and stays unique if a partition's item is ever recreated and its counter starts again. A run
knows its token when it is planned: its lease holds the published version, and its commit makes the next one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from lakeline.errors import InvalidInputError
from lakeline.storage import RUN_TOKEN_PATTERN

VERSION_PATTERN = re.compile(r"^v([1-9][0-9]{0,17})\.(\d{8}t\d{12}_[0-9a-f]{10})$")


class VersionRef(NamedTuple):
    """A version as a user names it: its number (as ``lakeline status`` shows it), with its run or not."""

    number: int
    run_token: str | None = None

    def matches(self, token: str) -> bool:
        parsed = VERSION_PATTERN.fullmatch(token)
        if parsed is None:
            return False
        return int(parsed.group(1)) == self.number and self.run_token in (None, parsed.group(2))


def version_token(version: int, run_token: str) -> str:
    if version < 1 or not RUN_TOKEN_PATTERN.fullmatch(run_token):
        raise InvalidInputError(f"no version token for version {version} of run {run_token!r}")
    return f"v{version}.{run_token}"


def version_number(token: str) -> int:
    """The commit counter a token carries (``InvalidInputError`` for text that is not a token)."""
    parsed = VERSION_PATTERN.fullmatch(token)
    if parsed is None:
        raise InvalidInputError(f"{token!r} is not a partition version token (v<version>.<run token>)")
    return int(parsed.group(1))


def parse_version(text: str) -> VersionRef:
    """``3``, ``v3`` or a whole token ``v3.<run token>``."""
    parsed = VERSION_PATTERN.fullmatch(text)
    if parsed is not None:
        return VersionRef(int(parsed.group(1)), parsed.group(2))
    number = text.removeprefix("v")
    if number.isdigit() and 0 < int(number) < 10**18:
        return VersionRef(int(number))
    raise InvalidInputError(
        f"--version {text!r} is not a partition version: give its number as `lakeline status` shows it (3 or v3) "
        "or its token (v3.<run token>)"
    )


def planned_version(lease: Mapping[str, Any] | None, run_token: str, *, writes: bool) -> str | None:
    """The token of the version a leased run commits (the one after its lease's), or ``None``: the run writes
    nothing, or it holds no lease (nothing is committed, so there is no version to name)."""
    if lease is None or not writes:
        return None
    return version_token(int(lease.get("version") or 0) + 1, run_token)


def published_version(lease: Mapping[str, Any] | None, run_token: str) -> str | None:
    """The token of the version a lease found published, written by ``run_token`` (``onward_run``'s run)."""
    if lease is None or not int(lease.get("version") or 0):
        return None
    return version_token(int(lease["version"]), run_token)
