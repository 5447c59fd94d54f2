"""Libraries' log lines and warnings never reach the terminal of a ``lakeline`` command: they are kept in the log
file of the folder the command works in (``lakeline.logs``), or in the user's log if it names none. The commands
run as users run them, in a process of their own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

MANUAL = Path(__file__).parents[1] / "fixtures" / "glue" / "manual"
RECOVER_JOB = """from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
spark.sql("ALTER TABLE sales_raw.orders RECOVER PARTITIONS")
"""
WARNING = "WARNING sqlglot: 'ALTER TABLE sales_raw.orders RECOVER PARTITIONS' contains unsupported syntax"


def lakeline(*args: str, cwd: Path, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "XDG_STATE_HOME": str(state)}
    return subprocess.run(
        [sys.executable, "-m", "lakeline", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_glue_lineage_keeps_the_sql_parsers_warnings_in_its_folders_log(tmp_path: Path) -> None:
    folder = tmp_path / "dump"
    folder.mkdir()
    for tables in MANUAL.glob("tables.*.json"):
        shutil.copy(tables, folder)
    job = folder / "jobs" / "recover"
    job.mkdir(parents=True)
    (job / "recover.py").write_text(RECOVER_JOB)
    (job / "job.json").write_text(
        '{"Job": {"Name": "recover", "Command": {"Name": "glueetl", "ScriptLocation": "s3://code/recover.py"}}}'
    )
    result = lakeline("glue", "lineage", str(folder), cwd=tmp_path, state=tmp_path / "state")
    assert result.returncode == 0, result.stderr
    assert result.stderr == f"2 events written to {folder / 'lineage' / 'openlineage.jsonl'}\n"
    assert WARNING in (folder / "lineage" / "lakeline.log").read_text()
    assert not (tmp_path / "state").exists()


def test_a_command_that_names_no_folder_keeps_them_in_the_users_log(tmp_path: Path) -> None:
    """A library's warning record and a ``warnings.warn``, in a process that captured them and named no folder."""
    code = (
        "import logging, warnings\n"
        "from lakeline import logs\n"
        "logs.capture()\n"
        "logging.getLogger('somelibrary').warning('a library speaks')\n"
        "warnings.warn('a library is old', DeprecationWarning, stacklevel=1)\n"
        "warnings.simplefilter('always')\n"
        "warnings.warn('a library is older', UserWarning, stacklevel=1)\n"
    )
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr) == (0, "")
    log = (tmp_path / "state" / "lakeline" / "lakeline.log").read_text()
    assert "WARNING somelibrary: a library speaks" in log
    assert "WARNING py.warnings:" in log and "UserWarning: a library is older" in log
