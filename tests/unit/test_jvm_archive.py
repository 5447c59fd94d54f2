"""The embedded Spark's class-data archive (``lakeline.engines.jvm_archive``): one start writes it, later
ones use it, a part still written or claimed is left to its writer, and an archive the JVM could not use
goes. (A real JVM writing and mapping one takes a minute: measured by hand, see the module.)"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from lakeline.engines.jvm_archive import KEPT, SETTLED_SECONDS, _key, archive_options, discard_unusable

OPTIONS = "-Dderby.system.home=/somewhere -XX:TieredStopAtLevel=1"


def _dead_pid() -> int:
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(ended.stdout)


def _option(options: list[str], name: str) -> str | None:
    return next((option.split("=", 1)[1] for option in options if option.startswith(f"-XX:{name}=")), None)


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_the_first_start_claims_a_part_and_the_next_ones_leave_it_to_its_writer(tmp_path: Path) -> None:
    first = archive_options(tmp_path, OPTIONS)
    part = Path(_option(first, "ArchiveClassesAtExit") or "")
    assert part.name == f"spark-{_key(OPTIONS)}.part-{os.getpid()}.jsa" and part.exists()
    assert _option(first, "SharedArchiveFile") is None

    second = archive_options(tmp_path, OPTIONS)  # its writer (this process) lives: nobody else writes one
    assert _option(second, "ArchiveClassesAtExit") is None and _option(second, "SharedArchiveFile") is None


def test_a_part_its_writer_left_still_is_adopted_and_used(tmp_path: Path) -> None:
    key = _key(OPTIONS)
    part = tmp_path / f"spark-{key}.part-{_dead_pid()}.jsa"
    part.write_bytes(b"archive")
    assert _option(archive_options(tmp_path, OPTIONS), "SharedArchiveFile") is None  # still being written
    _age(part, SETTLED_SECONDS + 5)

    used = _option(archive_options(tmp_path, OPTIONS), "SharedArchiveFile")

    assert used == str(tmp_path / f"spark-{key}.jsa") and Path(used).read_bytes() == b"archive"
    assert not part.exists()


def test_an_empty_part_of_a_jvm_that_never_wrote_is_dropped_and_written_anew(tmp_path: Path) -> None:
    key = _key(OPTIONS)
    empty = tmp_path / f"spark-{key}.part-{_dead_pid()}.jsa"
    empty.touch()
    _age(empty, SETTLED_SECONDS + 5)

    options = archive_options(tmp_path, OPTIONS)

    assert not empty.exists()
    assert _option(options, "ArchiveClassesAtExit") == str(tmp_path / f"spark-{key}.part-{os.getpid()}.jsa")


def test_another_jvm_or_options_need_another_archive_and_old_ones_go(tmp_path: Path) -> None:
    for index in range(KEPT + 1):
        archive = tmp_path / f"spark-old{index}.jsa"
        archive.write_bytes(b"x")
        _age(archive, 1000 - index)
    (tmp_path / f"spark-{_key(OPTIONS)}.jsa").write_bytes(b"mine")

    assert _key(OPTIONS) == _key("-Dderby.system.home=/elsewhere -XX:TieredStopAtLevel=1")  # paths do not count
    assert _key(OPTIONS) != _key("-Dderby.system.home=/somewhere")
    assert _key(OPTIONS) == _key(f"{OPTIONS} -XX:ErrorFile=/project/.lakeline/state/hs_err_pid%p.log")
    assert _option(archive_options(tmp_path, OPTIONS), "SharedArchiveFile") is not None
    newest_old = {f"spark-old{index}.jsa" for index in range(KEPT + 1)[-(KEPT - 1) :]}
    assert {path.name for path in tmp_path.iterdir()} == {f"spark-{_key(OPTIONS)}.jsa", *newest_old}


def test_an_archive_the_jvm_failed_with_is_removed(tmp_path: Path) -> None:
    archive = tmp_path / "spark-x.jsa"
    archive.write_bytes(b"cut short")

    assert discard_unusable(["-Xlog:disable", f"-XX:SharedArchiveFile={archive}"])
    assert not archive.exists()
    assert not discard_unusable(["-Xlog:disable"])


def test_a_folder_that_cannot_be_written_gives_no_archive(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    assert archive_options(blocked / "jvm", OPTIONS) == []
