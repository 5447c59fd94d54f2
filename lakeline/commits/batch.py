"""A run's batch of what waits on its partition (#39).

A run takes a bounded batch of what waits, oldest first; the rest stays in ``pending`` and the run's end hands
the lease to a follow-up run that takes the next batch, until nothing waits. The batch (the entries the run takes
and the ids it applies) is written as one object beside the run (``write_batch``) and its state machine input
carries only where it is (``BatchRef``): Step Functions refuses an input over 256 KiB, and a batch of a few
hundred arrivals in the input came close to a quarter of it. Its bound is then what the partition's item holds.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from lakeline.errors import InvalidInputError, LakelineError
from lakeline.storage import ObjectMissing, manifest_prefix

Waiting = TypeVar("Waiting")


def bounded_batch(
    waiting: Sequence[Waiting], cost: Callable[[Waiting], int], *, max_items: int, max_bytes: int
) -> list[Waiting]:
    """The first of ``waiting`` (oldest first, as given): at most ``max_items`` of them, costing at most
    ``max_bytes`` together (``cost``: what one adds to the run's input). The first is always taken, so a run
    always makes progress."""
    batch: list[Waiting] = []
    spent = 0
    for item in waiting[:max_items]:
        spent += cost(item)
        if batch and spent > max_bytes:
            break
        batch.append(item)
    return batch


BATCH_FOLDER = "batch/"
"""Where in a run's manifest prefix (``lakeline.storage.manifest_prefix``) its batch object is kept."""


class BatchMissing(LakelineError):
    """A run's batch object is not where its plan says (deleted with the run's manifests, or never written)."""


@dataclass(frozen=True)
class BatchRef:
    """Where a run's batch is kept and how many entries it takes: what its state machine input carries instead
    of the lists, so the input has the same size whatever the batch (#39)."""

    location: str
    count: int


@dataclass(frozen=True)
class RunBatch:
    """A run's batch: the ``pending`` entries it takes, exactly as the partition's item holds them (its commit
    takes these out), and the ids of the arrivals whose rows it adds (its commit records them as applied)."""

    pending: tuple[str, ...]
    applied: tuple[str, ...]

    def text(self) -> str:
        return json.dumps({"pending": sorted(self.pending), "applied": sorted(self.applied)}, sort_keys=True)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def batch_location(run_location: str, text: str) -> str:
    """Where the run writing ``run_location`` keeps the batch ``text``: under its manifest prefix, which goes with
    the run (its failure path, the sweep), named by its content, so a plan made again with another batch (a
    redelivery of the run's arrival once more waits) never replaces the one its execution reads."""
    return f"{manifest_prefix(run_location)}{BATCH_FOLDER}{_digest(text)}"


class BatchWriter(Protocol):
    def write_text(self, location: str, text: str) -> None: ...


class BatchReader(Protocol):
    def read_text(self, location: str) -> str: ...


def write_batch(store: BatchWriter, run_location: str, batch: RunBatch) -> BatchRef:
    """Write the batch of the run writing ``run_location``; where it is."""
    text = batch.text()
    location = batch_location(run_location, text)
    store.write_text(location, text)
    return BatchRef(location, len(batch.pending))


def read_batch(store: BatchReader, ref: BatchRef, run_location: str) -> RunBatch:
    """The batch at ``ref`` of the run writing ``run_location``; ``BatchMissing`` if it is not there,
    ``InvalidInputError`` if it is not that run's batch as written (another run's, or its content is not what its
    name was made from) or it holds another count than ``ref`` says."""
    try:
        text = store.read_text(ref.location)
    except ObjectMissing as missing:
        raise BatchMissing(f"the run's batch {ref.location} is missing ({missing})") from missing
    if ref.location != batch_location(run_location, text):
        raise InvalidInputError(f"{ref.location} is not the batch of the run writing {run_location} as written")
    data = json.loads(text)
    batch = RunBatch(tuple(str(e) for e in data["pending"]), tuple(str(i) for i in data["applied"]))
    if len(batch.pending) != ref.count:
        raise InvalidInputError(f"the run's batch {ref.location} takes {len(batch.pending)} entries, not {ref.count}")
    return batch
