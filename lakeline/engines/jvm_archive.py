"""A class-data archive of the embedded Spark's JVM (AppCDS): every start after the first maps the classes
Spark loads from one file instead of reading and verifying them from its jars. Measured on the 2-core
machine (a quick-start session, its first Hive query and two statements): the JVM's 22 CPU seconds become 8,
and the session starts in 4.3 s instead of 15.8 (a busy machine).

Java 17 writes such an archive when a JVM exits (``-XX:ArchiveClassesAtExit``), which for PySpark's JVM
is after the Python process that started it has ended. So one start asks its JVM for a part named by this
process's pid, and a later start adopts the part once that process is gone and the file has been still for
a while. The JVM checks an archive before it maps it and runs without one that does not match (another
Java or Spark), and its archive warnings go to standard error, which is the workspace's ``spark.log``,
never the user's terminal. An archive the JVM fails to start with (a part cut short by a kill while it was
written passes the JVM's first checks) is removed, and the start made again without it
(``discard_unusable``)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

# A part no longer written for this long (its process gone) is whole: a JVM writes one in seconds.
SETTLED_SECONDS = 60
KEPT = 2  # archives kept, the most recently used: one per Java and Spark in use, about 200 MB each
# Unified JVM logging (the archive's notes, as any other) to standard error, warnings only.
QUIET_LOGGING = ("-Xlog:disable", "-Xlog:all=warning:stderr")


def archive_folder() -> Path:
    """The user's cache folder of JVM archives (next to the synth cache)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lakeline" / "jvm"


def archive_options(folder: Path, java_options: str) -> list[str]:
    """The JVM options that use this JVM's archive in ``folder``, or write it at exit when there is none
    and no other process is writing one; none when the folder cannot be written."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        key = _key(java_options)
        final = folder / f"spark-{key}.jsa"
        if not final.is_file():
            _adopt_settled_part(folder, key, final)
        if final.is_file():
            os.utime(final)  # most recently used: kept longest
            _forget_older_archives(folder)
            return [*QUIET_LOGGING, f"-XX:SharedArchiveFile={final}"]
        if any(process_alive(pid) or not _settled(part) for pid, part in _parts(folder, key)):
            return list(QUIET_LOGGING)  # another process's JVM writes it, or is about to
        part = folder / f"spark-{key}.part-{os.getpid()}.jsa"
        part.touch()  # claimed now, so that the starts until this JVM exits do not write one each
        return [*QUIET_LOGGING, f"-XX:ArchiveClassesAtExit={part}"]
    except OSError:
        return []


def discard_unusable(options: list[str]) -> bool:
    """Remove the archive ``options`` had the JVM map, after the JVM failed to start with it (a file cut
    short passes the JVM's first checks and stops its start); whether there was one."""
    for option in options:
        if option.startswith("-XX:SharedArchiveFile="):
            Path(option.removeprefix("-XX:SharedArchiveFile=")).unlink(missing_ok=True)
            return True
    return False


def _key(java_options: str) -> str:
    """What an archive depends on: the Java that runs, Spark's jars and the JVM's options."""
    import pyspark  # here: this module is imported where PySpark is not installed

    java_home = os.environ.get("JAVA_HOME", "")
    java = shutil.which("java", path=str(Path(java_home) / "bin")) if java_home else shutil.which("java")
    java_file = Path(java).resolve() if java else None
    jars = Path(pyspark.__file__).parent / "jars"
    described = {
        "java": [str(java_file), java_file.stat().st_mtime_ns if java_file else None],
        "spark": [pyspark.__version__, sorted(jar.name for jar in jars.glob("*.jar"))],
        # Only the options that shape the JVM: a workspace's own paths (-D, where a crash report goes) change no
        # loaded class.
        "options": sorted(
            option
            for option in java_options.split()
            if option.startswith("-XX:") and not option.startswith("-XX:ErrorFile=")
        ),
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]


def _parts(folder: Path, key: str) -> list[tuple[int, Path]]:
    found = []
    for part in folder.glob(f"spark-{key}.part-*.jsa"):
        pid = part.name.removeprefix(f"spark-{key}.part-").removesuffix(".jsa")
        if pid.isdigit():
            found.append((int(pid), part))
    return found


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs (another user's counts: signalling it is refused, not unknown)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _adopt_settled_part(folder: Path, key: str, final: Path) -> None:
    """The newest part whose writer is gone and that is still becomes the archive; other such parts go."""
    settled = [part for pid, part in _parts(folder, key) if not process_alive(pid) and _settled(part)]
    settled.sort(key=lambda part: part.stat().st_mtime)
    for index, part in enumerate(reversed(settled)):
        with contextlib.suppress(FileNotFoundError):  # another start took it
            if index == 0 and part.stat().st_size > 0:  # empty: its JVM ended before it wrote one
                part.replace(final)
            else:
                part.unlink()


def _settled(part: Path) -> bool:
    try:
        return time.time() - part.stat().st_mtime > SETTLED_SECONDS
    except FileNotFoundError:
        return True


def _forget_older_archives(folder: Path) -> None:
    archives = sorted(
        (archive for archive in folder.glob("spark-*.jsa") if ".part-" not in archive.name),
        key=lambda archive: archive.stat().st_mtime,
    )
    for archive in archives[:-KEPT]:
        with contextlib.suppress(FileNotFoundError):
            archive.unlink()
