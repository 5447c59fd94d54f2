"""Packaging the Lambda code and the OpenLineage layer, without Docker.

Code ships with ``Code.from_asset`` and a *local* bundling step (no Docker, no network): it copies the
packages handlers import (``lambdas/``, ``lakeline/``, ``stage_a/``, ``stage_b/``) and vendors the one
pure-Python library they need that no layer provides (sqlglot, for stage B's step SQL) from the
installed environment. Everything else comes from the public Powertools layer (pydantic, aws-xray-sdk)
and the runtime (boto3, python-dateutil); a unit test imports every handler with nothing else available.

The handlers that emit OpenLineage events (``functions.OPENLINEAGE_HANDLERS``) also get the OpenLineage layer,
built the same way: the installed distributions in openlineage-python's requirement closure for the Lambda
runtime, less those the runtime or the Powertools layer provide. The venv's Python is older than the runtime's,
so no compiled module is ever shipped; every dependency in the closure runs without its compiled parts (PyYAML
and charset_normalizer have pure-Python fallbacks, and bundling fails on a compiled module that has none).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, cast

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from lakeline.aws.distributions import AWS_SDK, POWERTOOLS_LAYER
from lambdas.table_settings import TABLE_SETTINGS_FILE

REPO_ROOT = Path(__file__).resolve().parents[2]
CODE_PACKAGES = ("lambdas", "lakeline", "stage_a", "stage_b", "stage_lineage", "stage_end")
VENDORED_PACKAGES = ("sqlglot",)
CODE_EXCLUDES = [
    "*",
    *(pattern for package in CODE_PACKAGES for pattern in (f"!{package}", f"!{package}/**")),
    "**/__pycache__",
    "**/*.pyc",
]

OPENLINEAGE_DISTRIBUTION = "openlineage-python"
# Distributions already on the function's path, left out of the OpenLineage layer so that one copy (theirs)
# is imported: the Python 3.13 runtime's AWS SDK and the public Powertools layer (lakeline.aws.distributions).
# typing-extensions is shipped although Powertools has it:
# anyio needs a recent one, and this layer comes after Powertools', so its (backward compatible) copy wins.
PROVIDED_DISTRIBUTIONS = frozenset(canonicalize_name(name) for name in (*AWS_SDK, *POWERTOOLS_LAYER))
# The runtime the requirement markers are evaluated for: functions.RUNTIME (Python 3.13) on x86_64
# (the Powertools layer's architecture).
RUNTIME_MARKERS = {
    "python_version": "3.13",
    "python_full_version": "3.13.0",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "os_name": "posix",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
}
COMPILED_SUFFIXES = (".so", ".pyd")
# Compiled modules without a .py next to them whose package imports fine without them.
COMPILED_WITH_FALLBACK = frozenset({"yaml/_yaml"})  # PyYAML uses its pure-Python loader and emitter instead


def requirement_closure(root: str, markers: Mapping[str, str] = RUNTIME_MARKERS) -> list[str]:
    """Canonical names of ``root`` and every distribution it requires, transitively, on the target
    described by ``markers`` (requirements of extras are not followed). Each must be installed here."""
    # This machine's values stand in for the markers the runtime does not pin (platform_release, ...).
    environment = {**{key: str(value) for key, value in default_environment().items()}, **markers, "extra": ""}
    found: list[str] = []
    pending = [canonicalize_name(root)]
    while pending:
        name = pending.pop(0)
        if name in found:
            continue
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise RuntimeError(
                f"{name} (needed by {root}) is not installed: install the project's dependencies"
            ) from None
        found.append(name)
        for text in distribution.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate(environment):
                pending.append(canonicalize_name(requirement.name))
    return found


def openlineage_layer_distributions() -> list[str]:
    return [name for name in requirement_closure(OPENLINEAGE_DISTRIBUTION) if name not in PROVIDED_DISTRIBUTIONS]


def copy_distribution(name: str, target: Path) -> None:
    """Copy an installed distribution's files (its modules and its ``.dist-info``, which
    ``importlib.metadata`` reads) into ``target``, leaving out compiled modules and bytecode."""
    distribution = importlib.metadata.distribution(name)
    if distribution.files is None:
        raise RuntimeError(f"{name} does not list its files (no RECORD): cannot copy it into a layer")
    shipped = {PurePosixPath(str(file)) for file in distribution.files}
    for file in sorted(shipped):
        if file.parts[0] == ".." or "__pycache__" in file.parts or file.suffix == ".pyc":
            continue  # console scripts outside site-packages, bytecode of another Python
        if file.suffix in COMPILED_SUFFIXES:
            module = file.parent / file.name.split(".", 1)[0]
            if module.with_suffix(".py") not in shipped and str(module) not in COMPILED_WITH_FALLBACK:
                raise RuntimeError(
                    f"{name} ships {file}, compiled for this venv's Python and without a pure-Python module next "
                    "to it: the layer cannot provide it for the Lambda runtime"
                )
            continue
        destination = target.joinpath(*file.parts)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(str(distribution.locate_file(file))), destination)


def bundle_openlineage_layer(output: Path) -> Path:
    """Write the OpenLineage layer's content into ``output`` (``python/...``); returns the python folder."""
    site = output / "python"
    for name in openlineage_layer_distributions():
        copy_distribution(name, site)
    return site


def _copy_package(source: Path, target: Path) -> None:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.pyi"))


def settings_document(table_settings: Mapping[str, Any], default_table_settings: Mapping[str, Any]) -> str:
    """The project's table settings as the code asset carries them (``lambdas.table_settings`` reads them)."""
    return json.dumps({"default": default_table_settings, "tables": table_settings}, sort_keys=True, indent=1)


@jsii.implements(cdk.ILocalBundling)
class LambdaCodeBundle:
    """Local bundling of the Lambda code: our packages plus vendored pure-Python dependencies, and the project's
    table settings (``settings``, a ``settings_document``) as ``lambdas/table_settings.json``."""

    def __init__(self, settings: str) -> None:
        self.settings = settings

    def try_bundle(self, output_dir: str, options: Any) -> bool:
        del options  # the Docker image and command are never used: bundling is always local
        output = Path(output_dir)
        for package in CODE_PACKAGES:
            _copy_package(REPO_ROOT / package, output / package)
        for name in VENDORED_PACKAGES:
            module = importlib.import_module(name)
            assert module.__file__ is not None
            _copy_package(Path(module.__file__).parent, output / name)
        (output / "lambdas" / TABLE_SETTINGS_FILE).write_text(self.settings)
        return True


@jsii.implements(cdk.ILocalBundling)
class OpenLineageLayerBundle:
    """Local bundling of the OpenLineage layer (see ``bundle_openlineage_layer``)."""

    def try_bundle(self, output_dir: str, options: Any) -> bool:
        del options  # always local, like LambdaCodeBundle
        bundle_openlineage_layer(Path(output_dir))
        return True


def local_asset(
    bundle: Any, *, runtime: lambda_.Runtime, exclude: Sequence[str], content: str = ""
) -> lambda_.AssetCode:
    """A Lambda asset from the repository, bundled locally by ``bundle`` (``LambdaCodeBundle`` or
    ``OpenLineageLayerBundle``), hashed by what is shipped so that a different vendored version is a
    different asset. ``content``: what the bundle writes besides the repository's files (the table settings),
    in the key of CDK's cache of bundled assets, so that an app with other settings in the same process is
    not given the first one's bundle."""
    return lambda_.Code.from_asset(
        str(REPO_ROOT),
        exclude=list(exclude),
        asset_hash_type=cdk.AssetHashType.OUTPUT,
        bundling=cdk.BundlingOptions(
            image=runtime.bundling_image,
            # jsii calls try_bundle(output_dir, options) positionally, unlike the typed protocol.
            local=cast(cdk.ILocalBundling, bundle),
            command=["false"],
            # Never read (bundling is local); here only to be in CDK's cache key, which holds the bundling options.
            environment={"LAKELINE_CONTENT_SHA256": hashlib.sha256(content.encode()).hexdigest()} if content else None,
        ),
    )
