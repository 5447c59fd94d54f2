"""Where the local deployment's time goes (``benchmarks/runtime.py`` reads it).

The runtime's parts time themselves at their real boundaries (the phases of a command, each execution,
each task, each function invocation, each query's Spark statement and the local Athena's work around it)
into the collector ``collecting`` switches on. Nothing is recorded and nothing is timed while none is on:
``phase`` and ``record`` then return at once, so the runtime pays nothing for them.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Timings:
    """Seconds by what was timed (``phase``/``record`` names), overall and by key (an execution, a query)."""

    totals: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    keyed: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(float)))
    """key → name → seconds (an execution ARN → its tasks' kinds; a query id → sql / around it)."""
    links: dict[str, str] = field(default_factory=dict)
    """A query id → the execution ARN whose task started it."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, name: str, seconds: float, key: str | None = None) -> None:
        with self._lock:
            self.totals[name] += seconds
            self.counts[name] += 1
            if key is not None:
                self.keyed[key][name] += seconds

    def link(self, query_id: str, execution: str) -> None:
        with self._lock:
            self.links[query_id] = execution

    def of_execution(self, arn: str) -> dict[str, float]:
        """An execution's seconds by name, its queries' Spark and local-Athena seconds included."""
        with self._lock:
            found = dict(self.keyed.get(arn, {}))
            for query, execution in self.links.items():
                if execution == arn:
                    for name, seconds in self.keyed.get(query, {}).items():
                        found[name] = found.get(name, 0.0) + seconds
        return found


_active: Timings | None = None


@contextmanager
def collecting() -> Iterator[Timings]:
    """Record what the runtime times while inside, into the ``Timings`` yielded."""
    global _active
    previous, _active = _active, Timings()
    try:
        yield _active
    finally:
        _active = previous


def enabled() -> bool:
    return _active is not None


def record(name: str, seconds: float, key: str | None = None) -> None:
    if _active is not None:
        _active.add(name, seconds, key)


def link(query_id: str, execution: str) -> None:
    if _active is not None:
        _active.link(query_id, execution)


@contextmanager
def phase(name: str, key: str | None = None) -> Iterator[None]:
    """Time what runs inside as ``name`` (under ``key`` as well), if a collector is on."""
    collector = _active
    if collector is None:
        yield
        return
    started = time.perf_counter()
    try:
        yield
    finally:
        collector.add(name, time.perf_counter() - started, key)
