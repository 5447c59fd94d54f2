"""Which folders may import which: the product never imports test or benchmark code, the benchmarks
never import the tests (what they share is ``harness/``), ``lakeline.cli`` is the top layer, and
``lakeline.aws`` stands beneath the rest.

The full layering of ``lakeline/`` (CLI, local runtime, handlers, stages, library) is #19's redesign;
these are the rules that already hold, checked so that they keep holding."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
PRODUCT = ("lakeline", "lambdas", "stage_a", "stage_b", "stage_lineage")


def imports_of(path: Path) -> set[str]:
    """Every absolute module name ``path`` imports (at any depth of the file)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def offenders(folders: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*.py")):
            bad = sorted(name for name in imports_of(path) if name.split(".")[0] in forbidden)
            found += [f"{path.relative_to(REPO)} imports {name}" for name in bad]
    return found


@pytest.mark.parametrize(
    ("folders", "forbidden"),
    [
        (PRODUCT, ("tests", "harness", "benchmarks")),
        (("benchmarks", "harness"), ("tests",)),
    ],
)
def test_no_folder_imports_one_it_must_not(folders: tuple[str, ...], forbidden: tuple[str, ...]) -> None:
    assert offenders(folders, forbidden) == []


def test_lakeline_aws_imports_nothing_of_the_project_but_lakeline_errors() -> None:
    for path in sorted((REPO / "lakeline" / "aws").glob("*.py")):
        above = {
            name
            for name in imports_of(path)
            if name.split(".")[0] in PRODUCT and not name.startswith(("lakeline.aws", "lakeline.errors"))
        }
        assert not above, f"{path.name} imports {sorted(above)}"


def test_the_cli_is_the_top_layer() -> None:
    """Only ``python -m lakeline`` imports the CLI: no library, stage, handler or local-runtime module."""
    importers = []
    for folder in PRODUCT:
        for path in sorted((REPO / folder).rglob("*.py")):
            if path.is_relative_to(REPO / "lakeline" / "cli") or path == REPO / "lakeline" / "__main__.py":
                continue
            if any(name == "lakeline.cli" or name.startswith("lakeline.cli.") for name in imports_of(path)):
                importers.append(str(path.relative_to(REPO)))
    assert importers == []


def test_the_check_finds_an_offender(tmp_path: Path) -> None:
    """The rule can fail: a module importing from tests is reported."""
    module = tmp_path / "m.py"
    module.write_text("from tests.conftest import Clock\nimport harness.faults\n")
    assert imports_of(module) == {"tests.conftest", "harness.faults"}
