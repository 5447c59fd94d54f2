"""The compaction of the lineage archive: staged traces folded into a fixed number of objects per day, nothing
lost, doubled or destroyed when it crashes, runs twice at once, races a trace or meets a pre-bucket archive."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from lakeline.lineage.records.archive import (
    ARCHIVE_BUCKETS,
    LocalArchiveStore,
    S3ArchiveStore,
    archive_body,
    bucket_object_key,
    parse_archive,
    read_root_lines,
    staging_store,
    trace_object_key,
)
from lakeline.lineage.records.compact import compact_archive, compact_day, staged_days
from lakeline.lineage.records.trace import archive_tree
from lakeline.lineage.records.tree import LineageNode, LineageTree, build_tree

DAY = date(2026, 11, 23)
AT = datetime(2026, 11, 23, 2, 0, tzinfo=UTC)


def tree(root: str, leaves: int = 2) -> LineageTree:
    raw = LineageNode(root, f"{root}-raw", root, "RAW_DATA_INPUT", "s3://raw/f.csv", 1, None, None, None, None, None)
    done = [
        LineageNode(root, f"{root}-leaf{n}", raw.node_id, "STAGE_A_COMPLETE", f"s3://s/{n}/", 2, None, None, None, None)
        for n in range(leaves)
    ]
    return build_tree(root, [raw, *done])


def stage(store: LocalArchiveStore, root: str, *, leaves: int = 2, at: datetime = AT) -> None:
    archive_tree(tree(root, leaves), store, DAY, archived_at=at, action="DATA_COMPACTION")


def day_lines(store: LocalArchiveStore) -> list[tuple[str, str]]:
    """Every (root, record) line of the day as a reader of the table sees it: every object of the day folder."""
    return sorted(
        (line.root_id, line.record_id)
        for key in store.keys(f"dt={DAY.isoformat()}/")
        for line in parse_archive(store.get(key) or b"", where=key)
    )


def expected(roots: dict[str, int]) -> list[tuple[str, str]]:
    return sorted((root, f"{root}-leaf{n}") for root, leaves in roots.items() for n in range(leaves))


def snapshot(store: LocalArchiveStore) -> dict[str, bytes]:
    return {key: store.get(key) or b"" for key in store.keys(f"dt={DAY.isoformat()}/")}


def test_a_day_of_roots_becomes_a_fixed_number_of_objects_each_line_once(tmp_path: Path) -> None:
    store = LocalArchiveStore(tmp_path / "archive")
    roots = {f"root-{n}": 2 for n in range(100)}
    for root in roots:
        stage(store, root)
    assert store.keys() == []  # staged: nothing in the table's folders yet
    assert staged_days(store) == [DAY]
    [result] = compact_archive(store)
    assert len(result.staged) == 100 and staging_store(store).keys() == [] and staged_days(store) == []
    assert store.keys() == sorted(f"dt={DAY.isoformat()}/part-{n}.jsonl" for n in range(ARCHIVE_BUCKETS))
    assert day_lines(store) == expected(roots)
    # Each line's archive step names the object it is in.
    for key in store.keys("dt="):
        for line in parse_archive(store.get(key) or b""):
            assert line.lineage[-1]["storage_location"] == store.location(key)
            assert key == bucket_object_key(DAY, line.root_id)
    # A root traced again replaces its lines (it grew a leaf); the others keep theirs, byte for byte.
    before = snapshot(store)
    stage(store, "root-7", leaves=3, at=AT + timedelta(hours=1))
    compact_day(store, DAY)
    assert day_lines(store) == expected({**roots, "root-7": 3})
    changed = [key for key, body in snapshot(store).items() if before[key] != body]
    assert changed == [bucket_object_key(DAY, "root-7")]
    assert [line.record_id for line in read_root_lines(store, "root-7")] == [f"root-7-leaf{n}" for n in range(3)]


def test_the_newest_staged_trace_of_a_root_wins_whatever_the_order_written(tmp_path: Path) -> None:
    store = LocalArchiveStore(tmp_path / "archive")
    stage(store, "root-a", leaves=3, at=AT + timedelta(minutes=5))
    stage(store, "root-a", leaves=1, at=AT)  # an older trace whose write came late
    compact_day(store, DAY)
    assert day_lines(store) == expected({"root-a": 3})


def test_an_older_trace_staged_after_a_newer_one_was_folded_does_not_replace_it(tmp_path: Path) -> None:
    store = LocalArchiveStore(tmp_path / "archive")
    stage(store, "root-a", leaves=3, at=AT + timedelta(minutes=5))
    compact_day(store, DAY)
    stage(store, "root-a", leaves=1, at=AT)  # a slow, redelivered trace that started first finishes last
    compact_day(store, DAY)
    assert day_lines(store) == expected({"root-a": 3}) and staging_store(store).keys() == []
    stage(store, "root-a", leaves=4, at=AT + timedelta(minutes=6))  # a newer one does
    compact_day(store, DAY)
    assert day_lines(store) == expected({"root-a": 4})


class Crash(Exception):
    pass


def test_a_crash_between_the_rewrite_and_the_deletes_is_redone_to_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalArchiveStore(tmp_path / "archive")
    roots = {f"root-{n}": 2 for n in range(30)}
    for root in roots:
        stage(store, root)

    def crash(self: LocalArchiveStore, key: str) -> None:
        raise Crash(key)

    with monkeypatch.context() as patch:
        patch.setattr(LocalArchiveStore, "delete", crash)
        with pytest.raises(Crash):
            compact_day(store, DAY)
    written = snapshot(store)
    assert written and len(staging_store(store).keys()) == 30  # some buckets written, every root still staged
    compact_day(store, DAY)
    assert day_lines(store) == expected(roots)
    assert {key: snapshot(store)[key] for key in written} == written  # folded again: the same bytes
    assert staging_store(store).keys() == []


class GatedStore(LocalArchiveStore):
    """An archive whose first conditional write waits at a gate (the interleavings below)."""

    def __init__(self, root: Path, at_gate: Callable[[], None]) -> None:
        super().__init__(root)
        self.at_gate = at_gate
        self.gated = False

    def put_if(self, key: str, body: bytes, tag: str | None) -> bool:
        if not self.gated:
            self.gated = True
            self.at_gate()
        return super().put_if(key, body, tag)


def test_two_compactions_at_once_lose_nothing(tmp_path: Path) -> None:
    """A reads the bucket and stops before its write; B, started later, folds a root staged meanwhile, writes
    and deletes; A's write must not put back the bucket it read (without B's root), whose staged object is
    gone: its conditional write fails and it starts again."""
    folder = tmp_path / "archive"
    plain = LocalArchiveStore(folder)
    first, second = (
        "root-0",
        next(
            f"root-{n}" for n in range(1, 99) if bucket_object_key(DAY, f"root-{n}") == bucket_object_key(DAY, "root-0")
        ),
    )
    stage(plain, first)
    reached, release = threading.Event(), threading.Event()

    def wait() -> None:
        reached.set()
        assert release.wait(10)

    gated = GatedStore(folder, wait)
    errors: list[BaseException] = []

    def run_a() -> None:
        try:
            compact_day(gated, DAY)
        except BaseException as error:  # handed to the test thread
            errors.append(error)

    a = threading.Thread(target=run_a)
    a.start()
    assert reached.wait(10)  # A has read staging (first) and the bucket (absent), and waits to write
    stage(plain, second)
    compact_day(plain, DAY)  # B: folds first and second, deletes both staged objects
    release.set()
    a.join(10)
    assert not errors
    assert day_lines(plain) == expected({first: 2, second: 2})
    assert staging_store(plain).keys() == []


def test_a_trace_staged_while_a_compaction_runs_waits_for_the_next(tmp_path: Path) -> None:
    folder = tmp_path / "archive"
    plain = LocalArchiveStore(folder)
    stage(plain, "root-a")
    gated = GatedStore(folder, lambda: stage(plain, "root-a", leaves=3, at=AT + timedelta(minutes=1)))
    compact_day(gated, DAY)  # the newer trace is staged after this compaction listed the staging folder
    assert day_lines(plain) == expected({"root-a": 2})
    assert len(staging_store(plain).keys()) == 1  # not deleted: it was not read
    compact_day(plain, DAY)
    assert day_lines(plain) == expected({"root-a": 3})


def test_an_archive_written_before_the_buckets_is_read_as_it_is_and_never_doubled(tmp_path: Path) -> None:
    store = LocalArchiveStore(tmp_path / "archive")
    old = tree("root-old")
    key = trace_object_key(DAY, "root-old")
    store.put(key, archive_body(old, location=store.location(key), action="DATA_COMPACTION", archived_at=AT))
    stage(store, "root-new")
    stage(store, "root-old", leaves=3, at=AT + timedelta(hours=1))  # traced again the same day, after the upgrade
    compact_day(store, DAY)
    assert day_lines(store) == expected({"root-old": 3, "root-new": 2})
    assert key in store.keys("dt=")  # written back into its own object, not into a bucket beside it
    lines = parse_archive(store.get(key) or b"")
    assert {line.root_id for line in lines} == {"root-old"}
    assert {line.lineage[-1]["storage_location"] for line in lines} == {store.location(key)}
    assert [line.record_id for line in read_root_lines(store, "root-old")] == [f"root-old-leaf{n}" for n in range(3)]


def test_s3_writes_are_conditional_on_the_object_read() -> None:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="archive")
        store = S3ArchiveStore(s3, "archive", "archive/")
        assert store.put_if("dt=2026-11-23/part-0.jsonl", b"a\n", None)
        assert not store.put_if("dt=2026-11-23/part-0.jsonl", b"b\n", None)  # it exists now
        _, tag = store.get_tagged("dt=2026-11-23/part-0.jsonl") or (b"", "")
        store.put("dt=2026-11-23/part-0.jsonl", b"c\n")  # someone else wrote it since
        assert not store.put_if("dt=2026-11-23/part-0.jsonl", b"d\n", tag)
        assert store.get("dt=2026-11-23/part-0.jsonl") == b"c\n"
        staging_store(store).put("dt=2026-11-23/trace-r-0000000000001.jsonl", b"")
        assert store.keys() == ["dt=2026-11-23/part-0.jsonl"]  # the staging folder is hidden from readers
        assert staging_store(store).keys() == ["dt=2026-11-23/trace-r-0000000000001.jsonl"]
