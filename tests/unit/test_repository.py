"""What Lakeline reads beyond its modules (#38): package data where it ships with the package, the repository
(``lakeline.repository``) where it is the repository's, found one way; no module reaches into the repository with
``Path(__file__).parents[N]``."""

from __future__ import annotations

import re
import subprocess
import tomllib
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

from lakeline import repository
from lakeline.project import settled
from lakeline.repository import RepositoryMissing, in_repository
from lakeline.runtimes.embedded.demo import demo_config

REPO = Path(__file__).parents[2]
PACKAGES = ("lakeline", "lambdas", "stage_a", "stage_b", "stage_lineage", "stage_end")
REACHES_UP = re.compile(r"__file__\)[\w().]*\.(parents\[|parent\.parent)")


def tracked(*paths: str) -> list[str]:
    listed = subprocess.run(["git", "ls-files", *paths], cwd=REPO, capture_output=True, text=True, check=True)
    return listed.stdout.split()


def test_no_product_module_reaches_into_the_repository_but_lakeline_repository() -> None:
    modules = [path for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))]
    reaching = [str(path.relative_to(REPO)) for path in modules if REACHES_UP.search(path.read_text())]
    assert reaching == ["lakeline/repository.py"]


def test_the_check_finds_a_module_that_reaches_up() -> None:
    assert REACHES_UP.search('ROOT = Path(__file__).resolve().parents[2] / "examples"')
    assert REACHES_UP.search("ROOT = Path(__file__).parent.parent")
    assert not REACHES_UP.search('CONFIG = Path(__file__).with_name("log4j2.properties")')


def test_every_file_beside_the_modules_is_package_data() -> None:
    """A wheel (``pip install .``) ships what ``[tool.setuptools.package-data]`` lists, and only that."""
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    missing = []
    for path in tracked(*PACKAGES):
        if path.endswith(".py"):
            continue
        folders = [
            (package, pattern)
            for package, patterns in declared.items()
            for pattern in patterns
            if fnmatchcase(path, package.replace(".", "/") + "/" + pattern)
        ]
        if not folders:
            missing.append(path)
    assert missing == []
    assert len(tracked(*PACKAGES)) > 150


def test_what_the_repository_lacks_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert in_repository("examples", "demo", needed_by="the demo") == REPO / "examples" / "demo"
    monkeypatch.setattr(repository, "REPOSITORY", tmp_path / "site-packages")
    with pytest.raises(RepositoryMissing, match=r"the demo reads examples/demo from .*pip install -e"):
        demo_config(tmp_path / "workspace")


def test_lakelines_own_code_is_found_where_it_is_installed() -> None:
    """The record of a clean run digests Lakeline's own code, found by the packages' specs (not by a path)."""
    assert [settled.package_folder(package) for package in PACKAGES] == [REPO / package for package in PACKAGES]
    with pytest.raises(LookupError):
        settled.package_folder("no_such_package_here")
