"""A full disk is recognised in each form it arrives in (``lakeline.runtimes.embedded.full_disk``, #37): Python's own
writes, Spark's task writers (through Lakeline's ``QueryFailed``), Derby's page writes; nothing else is."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from lakeline.engines.base import QueryFailed
from lakeline.runtimes.embedded.full_disk import DiskFull, full_disk


def test_a_python_write_names_its_file(tmp_path: Path) -> None:
    # /dev/full answers every write with ENOSPC: a real full device, no disk to fill.
    with pytest.raises(OSError) as caught, open("/dev/full", "w") as device:  # noqa: PTH123
        device.write("x")
        device.flush()
    error = full_disk(caught.value, tmp_path)
    assert isinstance(error, DiskFull)
    assert "the disk is full" in str(error) and str(tmp_path) in str(error)
    named = full_disk(OSError(errno.ENOSPC, "No space left on device", "/ws/state/x.tmp"), tmp_path)
    assert named is not None and "writing /ws/state/x.tmp failed" in str(named)


def test_spark_and_derby_failures_name_the_path_they_wrote() -> None:
    spark = QueryFailed(
        "Spark statement failed: [TASK_WRITE_FAILED] Task failed while writing rows to "
        "file:/ws/stage/t/day=1/lakeline_run=x. SQLSTATE: 58030 (caused by IOException: No space left on device)",
        sql="CREATE TABLE ...",
        query_id="q",
        reason="",
    )
    error = full_disk(spark, Path("/ws"))
    assert error is not None and "writing /ws/stage/t/day=1/lakeline_run=x failed" in str(error)
    derby = RuntimeError(
        "ERROR XSDG1: Page Page(7,Container(0, 1232)) could not be written to disk, please check if the disk is full."
    )
    assert full_disk(derby, Path("/ws")) is not None
    wrapped = RuntimeError("the metastore failed")
    wrapped.__cause__ = OSError(errno.ENOSPC, "No space left on device")
    assert full_disk(wrapped, Path("/ws")) is not None


def test_other_failures_are_not_a_full_disk() -> None:
    assert full_disk(OSError(errno.EACCES, "Permission denied", "/ws/x"), Path("/ws")) is None
    assert full_disk(RuntimeError("CREATE-TABLE-AS-SELECT ... non-empty directory"), Path("/ws")) is None
