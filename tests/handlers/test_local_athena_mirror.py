"""The local Athena's mirror of S3 (``lakeline.runtimes.deployed.local_aws.athena``), on moto's S3 without a query:
kept out of ``tests/rehearsal``, whose moto server ``mock_aws`` would reset."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def test_objects_with_hidden_names_outlive_the_mirror(tmp_path: Path) -> None:
    """The mirror leaves out what Spark writes beside its data (``_SUCCESS``, ``.crc``), but an object of
    S3 with such a name is S3's: bringing a bucket in and a query's writes back must not delete it."""
    import boto3
    from moto import mock_aws
    from moto.s3.models import s3_backends

    from lakeline.runtimes.deployed.local_aws.athena import LocalAthena

    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="lake")
        keys = ["team/table/date=1/_SUCCESS", "team/other/.keep", "team/table2/data.csv"]
        for key in keys:
            s3.put_object(Bucket="lake", Key=key, Body=b"1")
        backend = s3_backends["123456789012"]["aws"]
        athena = LocalAthena(engine=None, mirror=tmp_path, database_prefix="p_")  # type: ignore[arg-type]
        athena.store.pull(backend, "lake")  # before a query
        athena.store.push(backend, "lake")  # after one that wrote nothing
        assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket="lake")["Contents"]) == sorted(keys)


def test_an_object_replaced_or_deleted_while_the_mirror_reads_it_is_read_as_s3_holds_it_now(tmp_path: Path) -> None:
    """The mirror lists a bucket, then reads each object; another request may overwrite or delete one in between
    (a run's end deletes superseded prefixes while another run's query starts). moto closes the replaced version's
    buffer, and the read failed the query with "I/O operation on closed file" (a flaky scale test, session 23)."""
    import boto3
    from moto import mock_aws
    from moto.s3.models import s3_backends

    from lakeline.runtimes.deployed.local_aws.athena import LocalAthena

    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="lake")
        for key in ("t/replaced.csv", "t/deleted.csv"):
            s3.put_object(Bucket="lake", Key=key, Body=b"old")
        backend = s3_backends["123456789012"]["aws"]
        bucket = backend.buckets["lake"]
        listed = dict(bucket.keys.items())  # what the mirror lists, before the two requests below
        s3.put_object(Bucket="lake", Key="t/replaced.csv", Body=b"new")
        s3.delete_object(Bucket="lake", Key="t/deleted.csv")

        class ListedBefore:
            """The bucket's keys as listed before the requests; read as they are now."""

            def items(self) -> Any:
                return listed.items()

            def get(self, key: str, default: Any = None) -> Any:
                return real.get(key, default)

        real, bucket.keys = bucket.keys, ListedBefore()
        athena = LocalAthena(engine=None, mirror=tmp_path, database_prefix="p_")  # type: ignore[arg-type]
        try:
            athena.store.pull(backend, "lake")
        finally:
            bucket.keys = real
        assert (tmp_path / "lake" / "t" / "replaced.csv").read_bytes() == b"new"
        assert not (tmp_path / "lake" / "t" / "deleted.csv").exists()
