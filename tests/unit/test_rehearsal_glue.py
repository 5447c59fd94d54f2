"""What a rehearsed Glue job run can import (``lakeline.runtimes.deployed.local_aws.glue``): the library from the
zips ``--extra-py-files`` names, Glue's own packages and ``--additional-python-modules``, and the gap."""

from __future__ import annotations

import io
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from lakeline.runtimes.deployed.local_aws.glue import GLUE_PROVIDED, LocalGlueError, _additional_modules, _library
from stacks.constructs.glue_job import SPARK_DISTRIBUTIONS, SPARK_MODULES, pinned_modules


def zipped(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def test_the_library_zip_is_imported_for_the_run_and_this_process_copy_put_back() -> None:
    import lakeline

    library = zipped({"lakeline/__init__.py": "FROM_ZIP = True\n", "job_helpers.py": "VALUE = 42\n"})
    with _library([library], GLUE_PROVIDED):
        import job_helpers  # type: ignore[import-not-found]

        import lakeline as run_lakeline

        assert run_lakeline.FROM_ZIP and job_helpers.VALUE == 42
        assert ".zip" in str(run_lakeline.__file__)
    assert sys.modules["lakeline"] is lakeline and "job_helpers" not in sys.modules


def test_a_third_party_package_glue_would_not_have_is_refused() -> None:
    saved = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "networkx"}
    for name in saved:  # installed here (a dependency of the dev tools); imported afresh in the run
        del sys.modules[name]
    try:
        with _library([], GLUE_PROVIDED), pytest.raises(ModuleNotFoundError, match="not in Glue's runtime"):
            import networkx  # noqa: F401
    finally:
        sys.modules.update(saved)


def test_gap_a_package_this_process_imported_before_the_run_is_not_refused() -> None:
    """The run's imports are checked only when a package is imported afresh (this process is shared)."""
    import moto  # noqa: F401

    with _library([], GLUE_PROVIDED):
        import moto as again  # not a Glue package: refused in Glue, found here

        assert again


def test_other_threads_import_freely_during_a_run() -> None:
    """The moto server's threads answer the run's requests: their imports are not the job's."""
    found: list[object] = []
    with _library([], GLUE_PROVIDED):
        thread = threading.Thread(target=lambda: found.append(__import__("networkx")))
        thread.start()
        thread.join()
    assert found


def test_the_job_s_additional_modules_are_installed_at_allowed_versions() -> None:
    assert {"sqlglot", "pydantic", "python-dateutil"} <= _additional_modules(SPARK_MODULES)
    # Each pinned at the version the tests run with (#40): a job start installs what was tested.
    assert all("==" in requirement for requirement in SPARK_MODULES.split(","))
    with pytest.raises(LocalGlueError, match=r"sqlglot==0\.0\.1"):
        _additional_modules("sqlglot==0.0.1")
    with pytest.raises(LocalGlueError, match="not installed"):
        _additional_modules("no-such-distribution-here==1.0")


def test_the_job_s_pins_come_from_the_project_s_constraints(tmp_path: Path) -> None:
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("\n".join(f"{name}==1.{index}" for index, name in enumerate(SPARK_DISTRIBUTIONS)) + "\n")
    assert pinned_modules(constraints).split(",") == [f"{n}==1.{i}" for i, n in enumerate(SPARK_DISTRIBUTIONS)]
    constraints.write_text("sqlglot==30.30.0\n")
    with pytest.raises(ValueError, match="pins no version of pydantic"):
        pinned_modules(constraints)
