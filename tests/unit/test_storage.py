"""Locations are paths, not URLs, and the one delete function deletes nothing but a run prefix under
the table root its caller names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
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
def s3() -> Iterator[S3ObjectStore]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="lake")
        for key in (
            f"t#2/date=1/{RUN}part-0.parquet",
            "t#2/date=1/lakeline_run=20220101t000000000000_0000000000/part-0.parquet",
            "t#2/date=0/lakeline_run=20220101t000000000000_0000000000/part-0.parquet",
            "t/date=1/lakeline_run=20220101t000000000000_0000000000/part-0.parquet",  # the table urlparse saw
        ):
            client.put_object(Bucket="lake", Key=key, Body=b"x")
        yield S3ObjectStore(client)


def test_an_s3_delete_under_a_location_with_a_hash_removes_only_the_run_prefix(s3: S3ObjectStore) -> None:
    assert s3.delete_prefix(f"s3://lake/t#2/date=1/{RUN}", table_root="s3://lake/t#2/", table="db.t") == 1
    assert s3.list_data_files("s3://lake/") == [
        "s3://lake/t#2/date=0/lakeline_run=20220101t000000000000_0000000000/part-0.parquet",
        "s3://lake/t#2/date=1/lakeline_run=20220101t000000000000_0000000000/part-0.parquet",
        "s3://lake/t/date=1/lakeline_run=20220101t000000000000_0000000000/part-0.parquet",
    ]
