"""Every Lambda handler imports with only what its function is deployed with.

The CDK app ships our code with ``Code.from_asset`` (no Docker) and takes third-party packages from the
public Powertools layer (boto3 and python-dateutil are in the runtime; pydantic and aws-xray-sdk in the
layer), plus the pure-Python packages the local bundling step vendors. The functions that emit OpenLineage
events (``OPENLINEAGE_HANDLERS``) also get the OpenLineage layer, built here by the same bundling code the
synth runs. A handler that imports anything else would deploy fine and fail at its first invocation, so each
one is imported in a fresh interpreter where:

- a package is importable from the venv only if it belongs to a distribution the runtime or the Powertools
  layer provides (or one that those require) or to the vendored code; every other one is blocked, so optional
  imports take their fallbacks as they do in Lambda (sqlglot without mypy_extensions);
- a function with the layer finds the layer's packages only in the layer's folder (first on ``sys.path``, as
  ``/opt/python`` is in Lambda), and builds openlineage-python's HTTP and file transports from it; a function
  without it cannot import them at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stacks.constructs.bundling import (
    PROVIDED_DISTRIBUTIONS,
    RUNTIME_MARKERS,
    VENDORED_PACKAGES,
    bundle_openlineage_layer,
    copy_distribution,
    requirement_closure,
)
from stacks.constructs.functions import OPENLINEAGE_HANDLERS

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = sorted(path.parent.name for path in (ROOT / "lambdas").glob("*/handler.py"))
# Installed here for the CLI, local Spark and tests, and in no function: a check that they are blocked.
NOT_IN_LAMBDA = ["pyspark", "typer", "rich", "pyathena", "moto", "click", "mypy_extensions"]

CHECK = r"""
import importlib, importlib.abc, importlib.machinery, importlib.metadata, json, sys, sysconfig
from pathlib import Path

config = json.loads(sys.argv[1])
layer = config["layer"]
served = set(config["served"])  # the layer's top-level names, when the function has the layer
allowed = set(config["allowed"])  # distributions of the runtime, the Powertools layer and the vendored code
venv = sysconfig.get_paths()["purelib"]
owners = importlib.metadata.packages_distributions()


def canonical(name):
    return name.lower().replace("_", "-")


class DeployedPath(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if "." in name:
            return None  # a submodule: found on its package's __path__
        if name in served:
            spec = importlib.machinery.PathFinder.find_spec(name, [layer])
            if spec is None:
                raise ModuleNotFoundError(f"{name} is not in the OpenLineage layer")
            return spec
        spec = importlib.machinery.PathFinder.find_spec(name)
        where = spec and (spec.origin or next(iter(spec.submodule_search_locations or []), "")) or ""
        if where.startswith(venv) and not {canonical(d) for d in owners.get(name, [])} & allowed:
            # As in Lambda, where it is not installed (optional imports take their fallbacks).
            raise ModuleNotFoundError(f"{name} ({owners.get(name)}) is not available to this function")
        return None


sys.meta_path.insert(0, DeployedPath())
if layer:
    sys.path.insert(1, layer)  # after the code folder, before the runtime's packages, like /opt/python

importlib.import_module(config["module"])

if layer:
    import openlineage.client
    from openlineage.client.transport import get_default_factory

    factory = get_default_factory()
    http = factory.create({"type": "http", "url": "http://localhost:5000"})
    file = factory.create({"type": "file", "log_file_path": config["log_file"], "append": True})
    assert type(http).__name__ == "HttpTransport" and type(file).__name__ == "FileTransport", (http, file)
    # The compiled parts are not shipped: both packages run on their pure-Python fallbacks.
    import charset_normalizer.md, yaml
    assert yaml.__with_libyaml__ is False
    assert charset_normalizer.md.__file__.endswith(".py"), charset_normalizer.md.__file__
    assert Path(str(importlib.metadata.distribution("openlineage-python").locate_file(""))) == Path(layer)
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")  # requests.packages.* are urllib3's modules under other keys
        if name.partition(".")[0] in served:
            where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", [])), "")
            assert where.startswith(layer + "/"), f"{name} was loaded from {where}, not from the layer"
"""


@pytest.fixture(scope="module")
def layer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The OpenLineage layer's ``python`` folder, bundled as the synth bundles it."""
    return bundle_openlineage_layer(tmp_path_factory.mktemp("openlineage-layer"))


def top_level_names(site: Path) -> list[str]:
    return sorted(
        path.stem if path.suffix == ".py" else path.name
        for path in site.iterdir()
        if (path.is_dir() and not path.name.endswith(".dist-info") and path.name != "__pycache__")
        or path.suffix == ".py"
    )


def test_there_are_handlers_to_check() -> None:
    assert "stage_a_router" in HANDLERS
    assert set(HANDLERS) >= OPENLINEAGE_HANDLERS


def test_the_layer_has_openlineage_and_its_pure_python_dependencies_only(layer: Path) -> None:
    assert layer.name == "python"
    names = top_level_names(layer)
    assert {"openlineage", "yaml", "requests", "attr", "attrs", "packaging", "charset_normalizer"} <= set(names)
    # What the runtime and the Powertools layer provide is not shipped twice; typing_extensions is, on
    # purpose: anyio needs a newer one than the Powertools layer may carry (see PROVIDED_DISTRIBUTIONS).
    assert not {"boto3", "botocore", "urllib3", "dateutil", "six", "pydantic"} & set(names)
    assert "typing_extensions" in names
    assert not [path for path in layer.rglob("*") if path.suffix in (".so", ".pyd", ".pyc")]
    assert not list(layer.rglob("__pycache__"))
    assert (layer / "charset_normalizer" / "md.py").is_file()
    # importlib.metadata finds the distributions in the layer (openlineage reads its own version so).
    dist_infos = {path.name.split("-")[0].lower() for path in layer.glob("*.dist-info")}
    assert {"openlineage_python", "pyyaml", "requests", "attrs", "packaging"} <= dist_infos


def test_the_requirement_closure_is_the_lambda_runtimes() -> None:
    closure = requirement_closure("openlineage-python")
    assert closure[0] == "openlineage-python"
    assert {"attrs", "pyyaml", "requests", "packaging", "certifi", "idna", "urllib3", "python-dateutil"} <= set(closure)
    # anyio needs typing-extensions below Python 3.15 only: markers are evaluated for the target, not this venv.
    assert "typing-extensions" in requirement_closure("anyio")
    newer = {**RUNTIME_MARKERS, "python_version": "3.15", "python_full_version": "3.15.0"}
    assert "typing-extensions" not in requirement_closure("anyio", newer)
    with pytest.raises(RuntimeError, match=r"no-such-distribution .* is not installed"):
        requirement_closure("no-such-distribution")


def test_a_compiled_module_without_a_fallback_is_refused(tmp_path: Path) -> None:
    # pydantic-core is nothing but its compiled module: it can only come from the Powertools layer.
    with pytest.raises(RuntimeError, match=r"_pydantic_core\..*without a pure-Python module"):
        copy_distribution("pydantic-core", tmp_path)


def test_bundling_the_layer_twice_gives_the_same_files(layer: Path, tmp_path: Path) -> None:
    again = bundle_openlineage_layer(tmp_path)
    files = sorted(path.relative_to(layer) for path in layer.rglob("*") if path.is_file())
    assert files == sorted(path.relative_to(again) for path in again.rglob("*") if path.is_file())
    assert all((layer / name).read_bytes() == (again / name).read_bytes() for name in files)


def run_check(module: str, layer: Path | None, log_file: Path) -> subprocess.CompletedProcess[str]:
    """Import ``module`` in a fresh interpreter that has what a function has (with the layer, or not)."""
    allowed = {d for provided in PROVIDED_DISTRIBUTIONS for d in requirement_closure(provided)}
    config = {
        "module": module,
        "layer": str(layer) if layer else "",
        "served": top_level_names(layer) if layer else [],
        "allowed": sorted(allowed | set(VENDORED_PACKAGES)),
        "log_file": str(log_file),
    }
    return subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"AWS_DEFAULT_REGION": "us-east-1", "PATH": "/usr/bin:/bin", "POWERTOOLS_DEV": "false"},
    )


@pytest.mark.parametrize("name", HANDLERS)
def test_handler_imports_with_only_what_its_function_is_deployed_with(name: str, layer: Path, tmp_path: Path) -> None:
    with_layer = layer if name in OPENLINEAGE_HANDLERS else None
    result = run_check(f"lambdas.{name}.handler", with_layer, tmp_path / "events.jsonl")
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.parametrize("module", [*NOT_IN_LAMBDA, "openlineage.client", "yaml", "requests", "attr"])
def test_what_a_function_without_the_layer_lacks_is_blocked(module: str, tmp_path: Path) -> None:
    result = run_check(module, None, tmp_path / "events.jsonl")
    assert result.returncode != 0
    assert "is not available to this function" in result.stderr, result.stderr[-2000:]


@pytest.mark.parametrize("module", NOT_IN_LAMBDA)
def test_the_layer_does_not_bring_what_no_function_has(module: str, layer: Path, tmp_path: Path) -> None:
    result = run_check(module, layer, tmp_path / "events.jsonl")
    assert "is not available to this function" in result.stderr, result.stderr[-2000:]
