"""Locations are paths, not URLs, and the one delete function deletes nothing but a run prefix under
the table root its caller names."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest
from boto3.s3.transfer import TransferConfig
from moto import mock_aws

from lakeline.errors import InvalidInputError
from lakeline.storage import (
    LocalObjectStore,
    Location,
    S3ObjectStore,
    check_run_prefix,
    local_root,
    parse_location,
    table_root_of,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

TOKEN = "20220120t101500000000_abcdef0123"
RUN = f"lakeline_run={TOKEN}/"


@pytest.mark.parametrize(
    ("location", "parsed"),
    [
        ("s3://bucket/team/t#1?v=2/date=1/", Location("s3", "bucket", "team/t#1?v=2/date=1/")),
        ("s3://bucket", Location("s3", "bucket", "")),
        ("file:///ws/#lake/?stage/t/", Location("file", "", "/ws/#lake/?stage/t/")),
        ("file:/ws/#lake/t/", Location("file", "", "/ws/#lake/t/")),  # as Hadoop writes it
        ("/ws/a%23b/t/", Location("file", "", "/ws/a%23b/t/")),  # nothing decoded either
    ],
)
def test_locations_keep_every_character_after_a_hash_or_a_question_mark(location: str, parsed: Location) -> None:
    assert parse_location(location) == parsed


@pytest.mark.parametrize("location", ["s3://", "s3:///key", "s3://#b/k", "file://host/x", "relative/x", "http://h/x"])
def test_what_is_not_a_location_is_refused(location: str) -> None:
    with pytest.raises(InvalidInputError, match="location"):
        parse_location(location)


@pytest.mark.parametrize(
    ("location", "root", "problem"),
    [
        ("s3://b/lake/t/", "s3://b/lake/t/", "not below its table root"),  # the table itself
        ("s3://b/lake/t/date=1/", "s3://b/lake/t/", "is not lakeline_run=<run token>"),  # a partition
        (f"s3://b/lake/t/{RUN}".rstrip("/"), "s3://b/lake/t/", "ends with '/'"),  # also lakeline_run=<token>2...
        ("s3://b/lake/t/lakeline_run=x/", "s3://b/lake/t/", "is not lakeline_run=<run token>"),
        (f"s3://b/lake/other/{RUN}", "s3://b/lake/t/", "not below its table root"),  # another table's
        (f"s3://b/lake/t/../x/{RUN}", "s3://b/lake/t/", "'..' folder"),
        (f"s3://b/lake/t//{RUN}", "s3://b/lake/t/", "empty"),
        (f"s3://b/lake/t/scratch/{RUN}", "s3://b/lake/t/", "'scratch' between the table root"),
        (f"s3://b/lake/t/date=../{RUN}", "s3://b/lake/t/", "'date=..' between"),
        (f"s3://other/lake/t/{RUN}", "s3://b/lake/t/", "not in the store"),
        (f"file:///lake/t/{RUN}", "s3://b/lake/t/", "not in the store"),
        (f"s3://b/{RUN}", "s3://b/", "top of a bucket"),
        (f"file:///{RUN}", "file:///", "top of a bucket or of the disk"),
        # What urlparse made of a run prefix under a table whose location has a '#': the table's folder.
        ("s3://b/lake/t", "s3://b/lake/t#2/", "ends with '/'"),
        ("file:///ws/", "file:///ws/#lake/stage/t/", "not below its table root"),
    ],
)
def test_the_guard_refuses_anything_but_a_run_prefix_under_the_table_root(
    location: str, root: str, problem: str
) -> None:
    with pytest.raises(InvalidInputError, match="refusing to delete") as refused:
        check_run_prefix(location, root)
    assert problem in str(refused.value) and repr(location) in str(refused.value)


def test_the_guard_accepts_run_prefixes_of_a_table_whose_location_has_odd_characters() -> None:
    root = "s3://b/lake/t#2?x=1/"
    assert check_run_prefix(f"{root}{RUN}", root).path == f"lake/t#2?x=1/{RUN}"
    assert check_run_prefix(f"{root}date=2022-01-20/hour=10/{RUN}", root).folders[-3:-1] == (
        "date=2022-01-20",
        "hour=10",
    )


def test_the_table_root_of_a_partition_root_must_end_with_that_partition() -> None:
    assert table_root_of("s3://b/lake/t#2/d=1/h=2/", {"h": "2", "d": "1"}) == "s3://b/lake/t#2/"
    assert table_root_of("file:///ws/#lake/t/", {}) == "file:///ws/#lake/t/"
    with pytest.raises(InvalidInputError, match="is not the root of partition"):
        table_root_of("s3://b/lake/t/d=1/", {"d": "2"})
    with pytest.raises(InvalidInputError, match="is not the root of partition"):
        table_root_of("s3://b/d=1/", {"d": "1"})


def test_a_local_delete_in_a_folder_named_with_a_hash_removes_only_the_run_prefix(tmp_path: Path) -> None:
    table = tmp_path / "#lake" / "?stage" / "t"
    run = table / "date=1" / RUN.rstrip("/")
    run.mkdir(parents=True)
    (run / "part-0.parquet").write_bytes(b"new")
    published = table / "date=1" / "lakeline_run=20220101t000000000000_0000000000"
    published.mkdir()
    (published / "part-0.parquet").write_bytes(b"old")
    (tmp_path / "sentinel.txt").write_text("keep")
    store = LocalObjectStore()
    assert store.delete_prefix(local_root(run), table_root=local_root(table), table="db.t") == 1
    assert not run.exists() and (published / "part-0.parquet").exists() and (tmp_path / "sentinel.txt").exists()
    with pytest.raises(InvalidInputError, match="refusing to delete"):
        store.delete_prefix(local_root(table / "date=1"), table_root=local_root(table), table="db.t")
    assert (published / "part-0.parquet").exists()


@pytest.fixture
def s3_client() -> Iterator[S3Client]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="lake")
        yield client


@pytest.fixture
def s3(s3_client: S3Client) -> S3ObjectStore:
    for key in (
        f"t#2/date=1/{RUN}part-0.parquet",
        "t#2/date=1/lakeline_run=20220101t000000000000_0000000000/part-0.parquet",
        "t#2/date=0/lakeline_run=20220101t000000000000_0000000000/part-0.parquet",
        "t/date=1/lakeline_run=20220101t000000000000_0000000000/part-0.parquet",  # the table urlparse saw
    ):
        s3_client.put_object(Bucket="lake", Key=key, Body=b"x")
    return S3ObjectStore(s3_client)


def test_an_s3_delete_under_a_location_with_a_hash_removes_only_the_run_prefix(s3: S3ObjectStore) -> None:
    assert s3.delete_prefix(f"s3://lake/t#2/date=1/{RUN}", table_root="s3://lake/t#2/", table="db.t") == 1
    assert s3.list_data_files("s3://lake/") == [
        "s3://lake/t#2/date=0/lakeline_run=20220101t000000000000_0000000000/part-0.parquet",
        "s3://lake/t#2/date=1/lakeline_run=20220101t000000000000_0000000000/part-0.parquet",
        "s3://lake/t/date=1/lakeline_run=20220101t000000000000_0000000000/part-0.parquet",
    ]


def test_a_carry_copies_files_side_by_side(s3_client: S3Client) -> None:
    """A partition of hundreds of files, copied one at a time, outlasts the commit function (#39): each copy
    here waits at a gate until three are under way, which a carry copying one file at a time never reaches."""
    for index in range(3):
        s3_client.put_object(Bucket="lake", Key=f"t/{RUN}part-{index}.parquet", Body=b"x")
    gate = threading.Barrier(3, timeout=10)

    def at_the_gate(**_: object) -> None:  # a before-call handler that returned a value would answer the call
        gate.wait()

    s3_client.meta.events.register("before-call.s3.CopyObject", at_the_gate)
    assert S3ObjectStore(s3_client).carry_files(f"s3://lake/t/{RUN}", "s3://lake/next/") == 3
    assert S3ObjectStore(s3_client).list_data_files("s3://lake/next/") == [
        f"s3://lake/next/part-{index}.parquet" for index in range(3)
    ]


def test_a_large_file_is_carried_in_parts(s3_client: S3Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """CopyObject copies at most 5 GB: above the threshold a carry copies part by part (the threshold lowered
    here to S3's smallest part so the file stays small)."""
    five_mb = 5 * 1024**2
    monkeypatch.setattr(
        "lakeline.storage.COPY_TRANSFER", TransferConfig(multipart_threshold=five_mb, multipart_chunksize=five_mb)
    )
    body = os.urandom(five_mb) * 2 + b"tail"
    s3_client.put_object(Bucket="lake", Key=f"t/{RUN}part-0.parquet", Body=body)
    parts: list[int] = []
    s3_client.meta.events.register("before-call.s3.UploadPartCopy", lambda params, **_: parts.append(1))
    assert S3ObjectStore(s3_client).carry_files(f"s3://lake/t/{RUN}", "s3://lake/next/") == 1
    assert len(parts) == 3
    assert s3_client.get_object(Bucket="lake", Key="next/part-0.parquet")["Body"].read() == body
