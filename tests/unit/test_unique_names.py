"""Unique names (#38): no public name is defined in two product modules, so a name found in a traceback, a
log line or a grep means one thing. A public name is a module's top-level ``def``, ``class``, assignment or
annotated assignment whose name does not start with ``_``.

The exceptions are conventions, listed in ``CONVENTIONS`` with their reason, each for the names and the
modules it holds for: a name defined in several modules passes only if every one of those modules is
covered by one convention naming it. A new duplicate anywhere else fails, and so does a convention that no
longer allows anything (the list stays as short as the code needs).
"""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

import pytest

REPO = Path(__file__).parents[2]
# The product packages of tests/unit/test_layers.py, and the CDK app's stacks.
PRODUCT = ("lakeline", "lambdas", "stage_a", "stage_b", "stage_lineage", "stage_end", "stacks")


def public_names(tree: ast.Module) -> set[str]:
    """The public names a module's top level defines."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_")}


def runs_as_program(tree: ast.Module) -> bool:
    """The module has an ``if __name__ == "__main__":`` block."""
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(test := node.test, ast.Compare):
            sides = [test.left, *test.comparators]
            if any(isinstance(side, ast.Name) and side.id == "__name__" for side in sides) and any(
                isinstance(side, ast.Constant) and side.value == "__main__" for side in sides
            ):
                return True
    return False


def console_scripts(root: Path) -> set[str]:
    """The modules (repository-relative paths) whose ``main`` is a console script of pyproject.toml."""
    scripts = tomllib.loads((root / "pyproject.toml").read_text())["project"].get("scripts", {})
    return {entry.split(":")[0].replace(".", "/") + ".py" for entry in scripts.values()}


@dataclass(frozen=True)
class Module:
    path: str  # repository-relative, with forward slashes
    tree: ast.Module


def product_modules(root: Path, folders: Iterable[str] = PRODUCT) -> list[Module]:
    return [
        Module(path.relative_to(root).as_posix(), ast.parse(path.read_text()))
        for folder in folders
        for path in sorted((root / folder).rglob("*.py"))
        if "__pycache__" not in path.parts
    ]


def matches(path: str, pattern: str) -> bool:
    """``pattern``'s parts match ``path``'s one for one (``*`` never spans a ``/``)."""
    parts, wanted = PurePosixPath(path).parts, PurePosixPath(pattern).parts
    return len(parts) == len(wanted) and all(fnmatchcase(part, want) for part, want in zip(parts, wanted, strict=True))


@dataclass(frozen=True)
class Convention:
    """Names that each module the convention covers may define for itself."""

    names: frozenset[str]
    covers: Callable[[Module, Path], bool]
    reason: str


def modules_like(*patterns: str) -> Callable[[Module, Path], bool]:
    return lambda module, _root: any(matches(module.path, pattern) for pattern in patterns)


def program(module: Module, root: Path) -> bool:
    return runs_as_program(module.tree) or module.path in console_scripts(root)


def module_logger(module: Module, _root: Path) -> bool:
    """``logger`` is the module's logger: ``logging.getLogger(...)`` or Powertools' ``Logger(...)``."""
    for node in module.tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "logger" for t in node.targets):
            call = node.value
            function = call.func if isinstance(call, ast.Call) else None
            name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
            return name in {"getLogger", "Logger"}
    return False


CONVENTIONS = (
    Convention(
        frozenset({"handler", "runtime", "Runtime", "tracer", "metrics", "processor", "dependencies", "environment"}),
        modules_like("lambdas/*/handler.py"),
        "a Lambda handler module: its entry point, its Powertools objects and what it builds once per container",
    ),
    Convention(
        frozenset({"logger"}),
        module_logger,
        "a module's own logger (logging.getLogger or Powertools' Logger), the usual name in any module",
    ),
    Convention(
        frozenset({"StartedRun", "execution_name", "plan_follow_up", "start_plan"}),
        modules_like("stage_a/start.py", "stage_b/start.py"),
        "the stage router surface: stage A and stage B start their runs through the same names, on purpose",
    ),
    Convention(
        frozenset({"register"}),
        modules_like("lakeline/cli/*.py"),
        "a CLI command module adds its commands to the app with register(app)",
    ),
    Convention(
        frozenset({"main"}),
        program,
        "a module run as a program (an `if __name__ == '__main__'` block, or a console script's module)",
    ),
)


def definitions(modules: Iterable[Module]) -> dict[str, list[Module]]:
    found: dict[str, list[Module]] = defaultdict(list)
    for module in modules:
        for name in public_names(module.tree):
            found[name].append(module)
    return found


def allowed(name: str, modules: list[Module], root: Path, conventions: Iterable[Convention]) -> Convention | None:
    """The convention under which every one of ``modules`` may define ``name``, if there is one."""
    for convention in conventions:
        if name in convention.names and all(convention.covers(module, root) for module in modules):
            return convention
    return None


def duplicates(root: Path, modules: list[Module], conventions: Iterable[Convention] = CONVENTIONS) -> list[str]:
    """Each public name defined in more than one module outside a convention, with the modules."""
    return [
        f"{name}: {', '.join(sorted(module.path for module in defined))}"
        for name, defined in sorted(definitions(modules).items())
        if len(defined) > 1 and allowed(name, defined, root, conventions) is None
    ]


def test_no_public_name_is_defined_in_two_product_modules() -> None:
    modules = product_modules(REPO)
    assert len(modules) > 150
    assert duplicates(REPO, modules) == [], "rename one, or import it from one home (see this module's docstring)"


def test_every_convention_still_allows_a_name_of_its_own() -> None:
    """Each convention's every name is defined in two or more modules it covers: none is kept for nothing."""
    found = definitions(product_modules(REPO))
    unused = [
        f"{name} ({convention.reason})"
        for convention in CONVENTIONS
        for name in sorted(convention.names)
        if len([module for module in found.get(name, []) if convention.covers(module, REPO)]) < 2
    ]
    assert unused == []


def write(root: Path, path: str, text: str) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path, "pyproject.toml", '[project]\nname = "x"\n[project.scripts]\nx = "lakeline.cli.main:main"\n')
    return tmp_path


def test_the_check_finds_a_duplicate_and_respects_each_conventions_scope(project: Path) -> None:
    write(project, "lakeline/a.py", "from typing import TypeVar\nLIMIT = 1\n_T = TypeVar('_T')\n\nclass Thing: ...\n")
    write(project, "stage_b/b.py", "LIMIT: int = 2\n_T = 3\nfrom lakeline.a import Thing\n")
    write(project, "lambdas/one/handler.py", "def handler(event, context): ...\nmetrics = 1\nlogger = Logger()\n")
    write(project, "lambdas/two/handler.py", "def handler(event, context): ...\nmetrics = 2\n")
    write(project, "lakeline/helpers.py", "metrics = 3\n")  # not a handler module: the convention does not cover it
    write(project, "lakeline/logged.py", "import logging\nlogger = logging.getLogger(__name__)\n")
    write(project, "lakeline/cli/main.py", "def main() -> None: ...\n")  # a console script
    write(project, "lakeline/tool.py", "def main() -> None: ...\nif __name__ == '__main__':\n    main()\n")
    write(project, "lakeline/library.py", "def main() -> None: ...\n")  # neither: its main is a duplicate
    modules = product_modules(project, ("lakeline", "lambdas", "stage_b"))
    assert duplicates(project, modules) == [
        "LIMIT: lakeline/a.py, stage_b/b.py",
        "main: lakeline/cli/main.py, lakeline/library.py, lakeline/tool.py",
        "metrics: lakeline/helpers.py, lambdas/one/handler.py, lambdas/two/handler.py",
    ]
    write(project, "stage_b/logs.py", "logger = 'a logger that is not one'\n")
    modules = product_modules(project, ("lakeline", "lambdas", "stage_b"))
    assert "logger: lakeline/logged.py, lambdas/one/handler.py, stage_b/logs.py" in duplicates(project, modules)
    (project / "stage_b" / "logs.py").unlink()
    (project / "lakeline" / "library.py").unlink()
    (project / "lakeline" / "helpers.py").unlink()
    modules = product_modules(project, ("lakeline", "lambdas", "stage_b"))
    assert duplicates(project, modules) == ["LIMIT: lakeline/a.py, stage_b/b.py"]


def test_a_pattern_part_matches_one_folder() -> None:
    assert matches("lambdas/stage_b_router/handler.py", "lambdas/*/handler.py")
    assert not matches("lambdas/stage_b_router/deep/handler.py", "lambdas/*/handler.py")
    assert not matches("lakeline/cli/sub/module.py", "lakeline/cli/*.py")
