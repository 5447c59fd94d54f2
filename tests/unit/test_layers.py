"""Which folders may import which: the product never imports test or benchmark code, the benchmarks
never import the tests (what they share is ``harness/``), ``lakeline.cli`` is the top layer, and
``lakeline.aws`` stands beneath the rest.

And the layers themselves (``LAYERS``): the CLI; the deployed runtime (``lakeline run``'s default: the CDK app
deployed on a local AWS and operated) with the operations that work on either runtime (status, reprocess, dead
letters), which read each other; the local AWS the deployed runtime stands up (beneath operations, since ``status``
reads a kept deployment's state); the embedded runtime (the handlers run in-process); what both runtimes read
(``lakeline.project``: configuration, workspace, quarantine, the SQL server); the handlers, a stage run's end, the
stage lineage glue, the stages, the library (itself four layers: what reads lineage back and the Glue scanner;
OpenLineage events, dependency items and partition commits; the rest; engines, storage and names), and
``lakeline.aws`` with ``lakeline.errors``; no module imports a layer above its own."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
PRODUCT = ("lakeline", "lambdas", "stage_a", "stage_b", "stage_lineage", "stage_end")


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


# Top to bottom. A module may import its own layer and the layers below it, never one above.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("lakeline.cli", "lakeline.__main__"),  # the `lakeline` command
    # The deployed runtime (`lakeline run`: a deployment stood up and operated) and status, reprocess, dead letters
    # (the same against either runtime or a stack), which read each other: status reads a running `lakeline up`'s
    # endpoint, a deployed run the stack outputs status names and the dead letters.
    ("lakeline.runtimes.deployed", "lakeline.operations"),
    ("lakeline.runtimes.deployed.local_aws",),  # the local AWS the deployed runtime stands up, and its kept state
    ("lakeline.runtimes.embedded",),  # the embedded runtime (runs the handlers in-process)
    ("lakeline.project",),  # what both runtimes read: configuration, workspace, quarantine, the SQL server
    ("lambdas", "lakeline.glue_jobs"),  # what AWS runs: the handlers and the Glue job script
    ("stage_end",),  # a stage run's end (after the publish, after a failure): what the handlers call
    ("stage_lineage",),  # lineage records and OpenLineage events of stage runs, from their plans
    ("stage_a", "stage_b"),  # the stages' logic
    # The library, in four layers of its own:
    ("lakeline.glue_scanner", "lakeline.lineage.viewer", "lakeline.lambda_support"),  # read lineage; handler support
    ("lakeline.lineage.openlineage", "lakeline.dependencies", "lakeline.partitions"),  # events; items; commits
    # the rest: column lineage, lineage records, commit states, settings, the catalog file, ...; and the quality
    # rules, beneath the settings and dependency items that will declare them and the stages that will run them
    ("lakeline", "lakeline.quality"),
    ("lakeline.engines", "lakeline.storage", "lakeline.catalog_locations", "lakeline.names"),  # engines, stores, names
    ("lakeline.aws", "lakeline.errors"),  # beneath everything
)


def layer_of(module: str) -> int | None:
    """The layer of a first-party module (the most specific prefix wins), or None for anything else."""
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for layer, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), layer)
    return best[1] if best else None


def upward_imports(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        module = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        mine = layer_of(module)
        for name in sorted(imports_of(path)):
            theirs = layer_of(name)
            if mine is not None and theirs is not None and theirs < mine:
                found.append(f"{module} imports {name}, a layer above it")
    return found


def test_no_module_imports_a_layer_above_it() -> None:
    paths = [path for folder in PRODUCT for path in sorted((REPO / folder).rglob("*.py"))]
    assert len(paths) > 150
    assert upward_imports(paths) == []


def test_the_layer_check_finds_an_upward_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bottom = len(LAYERS) - 1
    top = ("lakeline.cli.main", "lakeline.runtimes.embedded.project", "lakeline.aws.sqs")
    assert [layer_of(m) for m in top] == [0, 3, bottom]
    assert (layer_of("stage_b.plan"), layer_of("lakeline.commits"), layer_of("boto3")) == (8, 11, None)
    assert (layer_of("lakeline.lineage.viewer.html"), layer_of("lakeline.lineage.columns.sql")) == (9, 11)
    # Each runtime a layer of its own, what both read beneath them, the handlers they run beneath that.
    runtimes = ("runtimes.deployed.run", "operations.status", "runtimes.deployed.local_aws.kept_state")
    beneath = ("runtimes.embedded.event_flow", "project.workspace")
    assert [layer_of(f"lakeline.{name}") for name in (*runtimes, *beneath)] == [1, 1, 2, 3, 4]
    assert layer_of("lakeline.project.config") < layer_of("lambdas.stage_a_router.handler")
    assert layer_of("stage_end.stage_a") < layer_of("stage_lineage.records") < layer_of("stage_a.finish")
    module = tmp_path / "lakeline" / "commits.py"
    module.parent.mkdir()
    module.write_text("from stage_b.plan import StageBPlan\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert upward_imports([module]) == ["lakeline.commits imports stage_b.plan, a layer above it"]


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


def test_the_quality_rules_import_only_the_engine_protocol_errors_and_names() -> None:
    """``lakeline.quality`` (#41) stands on its own: whatever declares or runs checks imports it, not the reverse."""
    allowed = ("lakeline.quality", "lakeline.engines.base", "lakeline.errors", "lakeline.names")
    paths = sorted((REPO / "lakeline" / "quality").glob("*.py"))
    assert len(paths) >= 5
    for path in paths:
        first_party = {name for name in imports_of(path) if name.split(".")[0] in PRODUCT}
        assert {name for name in first_party if not name.startswith(allowed)} == set(), path.name
    assert layer_of("lakeline.quality.sql") == layer_of("lakeline.settings") > layer_of("lakeline.dependencies.model")
