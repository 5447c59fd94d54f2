"""The embedded JVM's own output goes to the workspace's ``state/spark.log``, not to the user's console;
a JVM that cannot start is one error quoting what it said."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lakeline.engines.spark import jvm_output_to
from lakeline.errors import LakelineError


def test_a_child_process_started_inside_writes_to_the_log_and_the_console_stays_clean(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "state" / "spark.log"
    with jvm_output_to(log):
        subprocess.run(["sh", "-c", "echo 'WARNING: Using incubator modules' >&2"], check=True)
    subprocess.run(["sh", "-c", "echo after >&2"], check=True)  # descriptor 2 is the console's again
    assert capfd.readouterr().err == "after\n"
    assert "WARNING: Using incubator modules" in log.read_text()


def test_a_failed_start_quotes_only_what_this_start_wrote(tmp_path: Path) -> None:
    log = tmp_path / "spark.log"
    log.write_text("an earlier run's line\n")
    with pytest.raises(LakelineError) as raised, jvm_output_to(log):
        subprocess.run(["sh", "-c", "echo '/nowhere/bin/java: No such file or directory' >&2"], check=True)
        raise RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited")
    message = str(raised.value)
    assert message.startswith("embedded Spark did not start: [JAVA_GATEWAY_EXITED]")
    assert "/nowhere/bin/java: No such file or directory" in message and "earlier run" not in message


def test_the_log_is_rotated_when_large(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("lakeline.engines.spark.MAX_JVM_LOG_BYTES", 10)
    log = tmp_path / "spark.log"
    log.write_text("x" * 100)
    with jvm_output_to(log):
        pass
    assert (tmp_path / "spark.log.1").read_text() == "x" * 100 and log.read_text().startswith("--- ")


def test_a_log_that_cannot_be_written_leaves_the_output_on_the_console(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    blocked = tmp_path / "state"
    blocked.write_text("a file where the folder would be")
    with jvm_output_to(blocked / "spark.log"):
        subprocess.run(["sh", "-c", "echo chatter >&2"], check=True)
    assert "chatter" in capfd.readouterr().err
