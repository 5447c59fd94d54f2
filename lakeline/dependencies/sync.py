"""Keeping ``dependencies-by-table`` in step with ``dependencies``: stream changes and backfill.

A change of one dependency item becomes puts (one pair per current source, carrying what routing needs)
and deletes (pairs of sources the item no longer has), applied in one transaction. Stream records of
one item arrive in order on one shard, and only that item's records touch its pairs, so applying them
in order converges; re-applying a record is harmless (puts overwrite, deletes of missing pairs are no-ops).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from lakeline.aws.sqs import dead_letter, json_body
from lakeline.dependencies.graph import check_no_cycle, datasets_in_cycles
from lakeline.dependencies.model import (
    DependencyEdge,
    DependencyItem,
    DependencyItemError,
    edges_of,
    normalise_table_name,
    parse_dependency_item,
)
from lakeline.dependencies.store import DependencyStore, source_tables_of_image
from lakeline.errors import InvalidInputError

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

ChangeKind = Literal["INSERT", "MODIFY", "REMOVE"]


@dataclass(frozen=True)
class EdgeChanges:
    dataset: str
    puts: tuple[DependencyEdge, ...]
    deletes: tuple[tuple[str, str], ...]


def _stored_key(image: Mapping[str, Any], item: DependencyItem) -> None:
    """An item stored under a non-normalised key would never be found by the normalised reads."""
    if image.get("dataset") != item.dataset:
        raise InvalidInputError(
            f"dependency item key {image.get('dataset')!r} is not normalised: store it as {item.dataset!r}"
        )


def _dataset_of(image: Mapping[str, Any]) -> str:
    dataset = image.get("dataset")
    if not isinstance(dataset, str) or not dataset:
        raise InvalidInputError("stream image has no 'dataset' key")
    return dataset


def _normalised(dataset: str) -> bool:
    try:
        return normalise_table_name(dataset, "dataset") == dataset
    except InvalidInputError:
        return False


def plan_edge_changes(
    kind: ChangeKind,
    old_image: Mapping[str, Any] | None,
    new_image: Mapping[str, Any] | None,
    paired_sources: Callable[[str], frozenset[str]],
) -> tuple[DependencyItem | None, EdgeChanges]:
    """The pairs to write and delete for one stream record; an invalid new item raises, naming why.

    Deleted: every source that has a pair for the target (``paired_sources``) or is named in the old
    image, and is not a source of the new item. The stored pairs matter when an earlier version was
    refused: the old image is then that refused version, not the one whose pairs are stored.
    """
    if kind == "REMOVE":
        if old_image is None:
            raise InvalidInputError("REMOVE record without an old image (the stream must be NEW_AND_OLD_IMAGES)")
        dataset = _dataset_of(old_image)
        if not _normalised(dataset):
            # Every version under this key was refused (``_stored_key``), so it has no pairs; the pairs of the item
            # under the normalised key are that item's, and stay.
            return None, EdgeChanges(dataset, (), ())
        gone = source_tables_of_image(old_image) | paired_sources(dataset)
        return None, EdgeChanges(dataset, (), tuple((source, dataset) for source in sorted(gone)))
    if new_image is None:
        raise InvalidInputError(f"{kind} record without a new image (the stream must be NEW_AND_OLD_IMAGES)")
    item = parse_dependency_item(new_image, f"dependency item {new_image.get('dataset')!r}")
    _stored_key(new_image, item)
    before = paired_sources(item.dataset)
    if old_image:
        before |= source_tables_of_image(old_image)
    removed = sorted(before - set(item.source_tables))
    return item, EdgeChanges(item.dataset, tuple(edges_of(item)), tuple((s, item.dataset) for s in removed))


def apply_stream_change(
    store: DependencyStore,
    kind: ChangeKind,
    old_image: Mapping[str, Any] | None,
    new_image: Mapping[str, Any] | None,
) -> EdgeChanges:
    """Apply one dependencies-table stream record to dependencies-by-table.

    Items written by other means than ``lakeline deps put`` are checked here too: an item that closes
    a cycle is refused (the error names the cycle) and its pairs are left as they were.
    """
    item, changes = plan_edge_changes(kind, old_image, new_image, store.sources_of_target)
    if item is not None:
        check_no_cycle(item.dataset, item.source_tables, store.upstream_sources)
    store.replace_edges(changes.puts, changes.deletes)
    return changes


STREAM_FUNCTION = "dependencies-by-table"
REFUSED_FIX = (
    "put a corrected item under the key named (`lakeline deps put`, or `aws dynamodb put-item`): sent back as it is, "
    "it would be refused again; an item refused for closing a cycle since broken elsewhere is applied by "
    "`lakeline deps backfill` (putting the identical item again writes no stream record)"
)
# The reason in the message body, cut well under SQS's 256 KiB (an item's every problem can be longer).
BODY_REASON_LIMIT = 16_000


@dataclass(frozen=True)
class RefusedChange:
    """A stream record whose item can never be applied (it does not validate, or it closes a cycle): parked in the
    stream's failure queue with the reason, so the record is done and the records behind it go on."""

    dataset: str | None
    event_name: str
    sequence_number: str
    reason: str

    def body(self) -> str:
        # The key, not the item: the item is in the dependencies table (and may be larger than a message).
        return json_body(
            {
                "refused_dependency_item": {
                    "dataset": self.dataset,
                    "event_name": self.event_name,
                    "sequence_number": self.sequence_number,
                    "reason": _cut(self.reason, BODY_REASON_LIMIT),
                },
                "fix": REFUSED_FIX,
            }
        )


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    note = f"\n... (cut: {len(text):,} characters in all; the stream function's log has the whole reason)"
    return text[: limit - len(note)] + note


def park_refused(sqs: SQSClient, queue_url: str, refused: RefusedChange) -> None:
    """Park a refused record with its reason (a failed send raises: the record is then retried, not lost)."""
    dead_letter(sqs, queue_url, refused.body(), refused.reason, STREAM_FUNCTION)


@dataclass
class BackfillReport:
    written: int = 0
    deleted: int = 0
    items: int = 0
    invalid: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "written": self.written,
            "deleted": self.deleted,
            "invalid": [{"dataset": key, "errors": errors} for key, errors in sorted(self.invalid.items())],
        }


def backfill(store: DependencyStore) -> BackfillReport:
    """Rebuild dependencies-by-table from every item of the dependencies table.

    Valid items get their pairs written; pairs no current item accounts for are deleted. Invalid items
    and items on a dependency cycle are reported and their existing pairs left untouched, since what
    they should be cannot be known.
    """
    report = BackfillReport()
    valid: dict[str, DependencyItem] = {}
    untouchable: set[str] = set()
    for image in store.scan_items():
        report.items += 1
        key = str(image.get("dataset"))
        try:
            item = parse_dependency_item(image, f"dependency item {key!r}")
            _stored_key(image, item)
        except InvalidInputError as error:
            report.invalid[key] = error.problems if isinstance(error, DependencyItemError) else [str(error)]
            untouchable.add(key.lower())
            continue
        valid[item.dataset] = item
    cycles = datasets_in_cycles({dataset: item.source_tables for dataset, item in valid.items()})
    for dataset, cycle in cycles.items():
        if dataset in valid:
            report.invalid[dataset] = [f"dependency cycle: {' needs '.join(cycle)}"]
            untouchable.add(dataset)
            del valid[dataset]
    puts = [edge for item in valid.values() for edge in edges_of(item)]
    expected = {edge.key for edge in puts}
    stale = [
        (source, target)
        for source, target in store.edge_keys()
        if (source, target) not in expected and target not in untouchable
    ]
    store.batch_write_edges(puts, stale)
    report.written = len(puts)
    report.deleted = len(stale)
    return report
