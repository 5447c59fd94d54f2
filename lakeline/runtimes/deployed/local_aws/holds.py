"""Points where a test holds the local deployment's work (an execution at a Task state, a function's
invocation) until its block ends, as a long query or a slow batch would, to assert what goes on meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

HOLD_SECONDS = 300.0
"""The longest held work waits."""


class Holds:
    def __init__(self) -> None:
        self._holds: dict[str, tuple[threading.Event, threading.Event]] = {}

    @contextmanager
    def held(self, key: str) -> Iterator[threading.Event]:
        """Inside the block, work that ``wait_at`` matches with ``key`` waits; the event yielded is set once
        some does."""
        reached, release = threading.Event(), threading.Event()
        self._holds[key] = (reached, release)
        try:
            yield reached
        finally:
            del self._holds[key]
            release.set()

    def wait_at(self, name: str, *, by_part: bool = False) -> None:
        """Wait while a block holds ``name`` (``by_part``: a key that is part of ``name``)."""
        for key, (reached, release) in list(self._holds.items()):
            if key == name or (by_part and key in name):
                reached.set()
                release.wait(HOLD_SECONDS)
