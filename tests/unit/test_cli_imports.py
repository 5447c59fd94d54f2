"""Every command of ``lakeline`` imports with only what ``pip install 'lakeline[local]'`` installs.

``make demo`` installs exactly the ``local`` extra, and a user of ``lakeline run`` on their own folders
installs nothing else. The test suite runs in the ``dev`` environment, which has far more (moto's other
services, the CDK, the type stubs), so a command whose module imports a package only ``dev`` brings
would pass every test and fail the user. This test finds, by reading the source, every first-party
module reachable from ``lakeline.cli`` (imports inside functions included: the commands import their
engines lazily) and every third-party package those modules import at run time, then imports all of
them in a fresh interpreter where the venv's packages are importable only if they belong to a
distribution in the requirement closure of ``lakeline[local]``.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
FIRST_PARTY = ("lakeline", "stage_a", "stage_b", "stage_lineage", "stage_end", "lambdas")
ENTRY = "lakeline.cli"
COMMANDS = ["demo", "run", "watch", "sql", "stage-a", "stage-b", "deps", "lineage", "glue"]

CHECK = r"""
import importlib, importlib.abc, importlib.machinery, importlib.metadata, json, sys, sysconfig

config = json.loads(sys.argv[1])
allowed = set(config["allowed"])
venv = sysconfig.get_paths()["purelib"]
owners = importlib.metadata.packages_distributions()


def canonical(name):
    return name.lower().replace("_", "-")


class LocalExtraOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if "." in name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name)
        where = spec and (spec.origin or next(iter(spec.submodule_search_locations or []), "")) or ""
        if where.startswith(venv) and not {canonical(d) for d in owners.get(name, [])} & allowed:
            raise ModuleNotFoundError(f"{name} ({owners.get(name)}) is not installed by lakeline[local]")
        return None


sys.meta_path.insert(0, LocalExtraOnly())
failed = []
for module in config["modules"]:
    try:
        importlib.import_module(module)
    except Exception as error:
        failed.append(f"{module}: {type(error).__name__}: {error}")
print(json.dumps(failed))
"""


def closure_with_extras(root: str, extras: set[str]) -> set[str]:
    """Canonical names of ``root[extras]`` and of everything it requires, transitively, extras included,
    with markers evaluated for this machine (the one ``make demo`` installs on)."""
    base = {key: str(value) for key, value in default_environment().items()}
    found: dict[str, set[str]] = {}
    pending = [(canonicalize_name(root), extras)]
    while pending:
        name, wanted = pending.pop()
        seen = found.get(name)
        if seen is not None and wanted <= seen:
            continue
        found[name] = (seen or set()) | wanted
        distribution = importlib.metadata.distribution(name)
        for text in distribution.requires or []:
            requirement = Requirement(text)
            applies = requirement.marker is None or any(
                requirement.marker.evaluate({**base, "extra": extra}) for extra in {"", *found[name]}
            )
            if applies:
                pending.append((canonicalize_name(requirement.name), set(requirement.extras)))
    return set(found)


def _under_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _optional(node: ast.Try) -> bool:
    """A ``try: import x`` / ``except ImportError:`` block: the import has a fallback."""
    names = {"ImportError", "ModuleNotFoundError"}
    for handler in node.handlers:
        caught = handler.type
        elements = caught.elts if isinstance(caught, ast.Tuple) else [caught]
        if any(isinstance(element, ast.Name) and element.id in names for element in elements):
            return True
    return False


def runtime_imports(path: Path, module: str) -> set[str]:
    """Absolute module names ``module`` imports when its code runs (not under TYPE_CHECKING, not in an
    ``except ImportError`` fallback), wherever in the file the import stands."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _under_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Try) and _optional(node):
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            found.add(source)
            # ``from pkg import submodule`` imports a module too.
            found.update(f"{source}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def reachable_from(entry: str) -> tuple[list[str], list[str]]:
    """First-party modules reachable from ``entry`` and the third-party top-level packages they import."""
    first_party: set[str] = set()
    third_party: set[str] = set()
    pending = [entry]
    while pending:
        name = pending.pop()
        if name in first_party:
            continue
        path = module_file(name)
        if path is None:
            continue  # ``from package import function``: not a module
        first_party.add(name)
        parts = name.split(".")
        pending.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # parent packages run first
        for imported in runtime_imports(path, name):
            top = imported.partition(".")[0]
            if top in FIRST_PARTY:
                pending.append(imported)
            elif top and top not in sys.stdlib_module_names and top != "__future__":
                third_party.add(top)
    return sorted(first_party), sorted(third_party)


def test_the_walk_reaches_every_command_and_the_handlers_the_local_runtime_runs() -> None:
    modules, packages = reachable_from(ENTRY)
    # The lazily imported command bodies are followed, down to the deployed handlers the demo runs.
    assert {
        "lakeline.runtimes.embedded.demo",
        "lakeline.runtimes.embedded.project",
        "lakeline.engines.spark",
        "lakeline.cli.deps",
        "lakeline.cli.lineage",
        "lakeline.cli.glue",
        "stage_a.plan",
        "stage_b.process",
        "lambdas.dependencies_by_table.handler",
        "lambdas.lineage_load.handler",
    } <= set(modules)
    assert {"pyspark", "moto", "aws_lambda_powertools", "typer", "rich", "sqlglot"} <= set(packages)
    # Type stubs are imported under TYPE_CHECKING only, and the Glue job's awsglue only on Glue.
    assert not {name for name in packages if name.startswith("mypy_boto3")}
    assert "awsglue" not in packages


def test_the_cli_has_the_commands_the_readme_names() -> None:
    from typer.main import get_command

    from lakeline.cli import app

    command = get_command(app)
    assert set(COMMANDS) <= set(command.commands), sorted(command.commands)  # type: ignore[attr-defined]


def test_every_module_reachable_from_the_cli_imports_with_only_the_local_extra() -> None:
    modules, packages = reachable_from(ENTRY)
    allowed = closure_with_extras("lakeline", {"local"})
    # The closure is the local extra's, not dev's: what only dev brings is not in it.
    assert {"pyspark", "moto", "aws-lambda-powertools", "flask", "pyathena"} <= allowed
    # The CDK is in it: `lakeline demo` and `run` synthesize the app.
    assert {"aws-cdk-lib", "cdk-nag"} <= allowed
    assert not {"pytest", "mypy", "hypothesis", "boto3-stubs", "sqllineage"} & allowed
    config = {"allowed": sorted(allowed), "modules": [*packages, *modules]}
    result = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"AWS_DEFAULT_REGION": "us-east-1", "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    failed = json.loads(result.stdout.strip().splitlines()[-1])
    assert failed == [], "\n".join(failed)


def test_a_module_only_dev_installs_is_refused() -> None:
    """The check itself can fail: a package of the dev extra only is blocked."""
    config = {"allowed": sorted(closure_with_extras("lakeline", {"local"})), "modules": ["hypothesis", "mypy"]}
    result = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(config)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    failed = json.loads(result.stdout.strip().splitlines()[-1])
    assert [line.split(":")[0] for line in failed] == ["hypothesis", "mypy"]
    assert all("is not installed by lakeline[local]" in line for line in failed)
