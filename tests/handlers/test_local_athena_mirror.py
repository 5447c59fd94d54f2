"""The local Athena's mirror of S3 (``lakeline.local.rehearsal.athena``), on moto's S3 without a query:
kept out of ``tests/rehearsal``, whose moto server ``mock_aws`` would reset."""

from __future__ import annotations

from pathlib import Path


def test_objects_with_hidden_names_outlive_the_mirror(tmp_path: Path) -> None:
    """The mirror leaves out what Spark writes beside its data (``_SUCCESS``, ``.crc``), but an object of
    S3 with such a name is S3's: bringing a bucket in and a query's writes back must not delete it."""
    import boto3
    from moto import mock_aws
    from moto.s3.models import s3_backends

    from lakeline.local.rehearsal.athena import LocalAthena

    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="lake")
        keys = ["team/table/date=1/_SUCCESS", "team/other/.keep", "team/table2/data.csv"]
        for key in keys:
            s3.put_object(Bucket="lake", Key=key, Body=b"1")
        backend = s3_backends["123456789012"]["aws"]
        athena = LocalAthena(engine=None, mirror=tmp_path, database_prefix="p_")  # type: ignore[arg-type]
        athena._pull(backend, "lake")  # before a query
        athena._push(backend, "lake")  # after one that wrote nothing
        assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket="lake")["Contents"]) == sorted(keys)
