"""A deployed function's environment in the rehearsal (``lakeline.runtimes.deployed.local_aws.functions``), without an
endpoint: warm between invocations, its errors named as Lambda names them, stopped at its timeout; the same
whether its process is started anew or forked by the zygote, which leaves the function's own code to its
asset."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeline.runtimes.deployed.local_aws.functions import BundledFunction, FunctionError, WarmFunction, Zygote

HANDLER = """
import time

calls = []


def handler(event, context):
    calls.append(event)
    if event.get("sleep"):
        time.sleep(event["sleep"])
    if event.get("fail"):
        raise KeyError(event["fail"])
    if event.get("exit"):
        import os
        os._exit(3)
    return {"calls": len(calls), "remaining_ms": context.get_remaining_time_in_millis()}
"""

SEEN = """
import os, sys

import boto3


def handler(event, context):
    if event.get("import"):
        __import__(event["import"])
    return {"cwd": os.getcwd(), "colour": os.environ.get("COLOUR"), "region": os.environ.get("AWS_REGION"),
            "parent": os.getppid(), "boto3": boto3.__file__, "zygote_only": os.environ.get("AWS_LAMBDA_FUNCTION_NAME")}
"""


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    started = Zygote(tmp_path_factory.mktemp("zygote") / "zygote.log")
    yield started
    started.stop()


def _function(
    tmp_path: Path,
    source: str,
    name: str,
    zygote: Zygote | None,
    environment: dict[str, str] | None = None,
    timeout: int = 1,
    bytecode: Path | None = None,
) -> WarmFunction:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / f"{name}.py").write_text(source)
    bundled = BundledFunction(name, f"arn:aws:lambda:us-east-1:1:function:{name}", f"{name}.handler", code, (),
                              environment or {}, "", timeout=timeout)  # fmt: skip
    return WarmFunction(bundled, endpoint="http://127.0.0.1:1", region="us-east-1", log=tmp_path / f"{name}.log",
                        credentials=None, zygote=zygote, bytecode=bytecode)  # fmt: skip


@pytest.fixture(params=["own process", "forked"])
def function(request: pytest.FixtureRequest, tmp_path: Path) -> WarmFunction:
    zygote = request.getfixturevalue("zygote") if request.param == "forked" else None
    return _function(tmp_path, HANDLER, "slow", zygote)


def test_an_environment_stays_warm_and_names_errors_as_lambda_does(function: WarmFunction) -> None:
    try:
        first = function.invoke({})
        # What is left of the 1 s timeout when the handler asks, counted down as Lambda counts it.
        assert first["calls"] == 1 and 500 < first["remaining_ms"] <= 1000, first
        assert function.invoke({})["calls"] == 2  # the same process: module state survives
        with pytest.raises(FunctionError) as failed:
            function.invoke({"fail": "colour"})
        assert (failed.value.error_type, failed.value.error_message) == ("KeyError", "'colour'")
        with pytest.raises(FunctionError) as exited:
            function.invoke({"exit": True})
        assert exited.value.error_type == "Runtime.ExitError"
        assert function.invoke({})["calls"] == 1  # a new environment
    finally:
        function.stop()


def test_an_invocation_past_the_timeout_is_stopped_and_the_next_gets_a_new_environment(function: WarmFunction) -> None:
    try:
        with pytest.raises(FunctionError) as timed_out:
            function.invoke({"sleep": 5})
        assert timed_out.value.error_type == "Sandbox.Timedout"
        assert timed_out.value.error_message == "Task timed out after 1.00 seconds"
        assert function.invoke({})["calls"] == 1  # a cold start
    finally:
        function.stop()


def test_a_forked_process_has_the_functions_folder_environment_and_nothing_else_of_this_machine(
    tmp_path: Path, zygote: Zygote
) -> None:
    function = _function(tmp_path, SEEN, "seen", zygote, {"COLOUR": "teal"}, timeout=30)
    try:
        seen = function.invoke({})
        assert seen["parent"] == zygote._process.pid  # forked: boto3 was imported once, in the zygote
        assert (seen["cwd"], seen["colour"], seen["region"]) == (str(tmp_path / "code"), "teal", "us-east-1")
        assert seen["zygote_only"] == "seen"
        # What neither the runtime nor the function's asset holds is missing, as in AWS.
        with pytest.raises(FunctionError) as missing:
            function.invoke({"import": "lakeline"})
        assert missing.value.error_type == "ModuleNotFoundError"
        with pytest.raises(FunctionError) as absent:
            function.invoke({"import": "helpers"})
        assert (absent.value.error_type, absent.value.error_message) == (
            "ModuleNotFoundError",
            "No module named 'helpers'",
        )
        (tmp_path / "code" / "helpers.py").write_text("")
        assert function.invoke({"import": "helpers"})["colour"] == "teal"  # the asset's file, once it holds it
    finally:
        function.stop()


def test_a_function_that_bundles_a_provided_package_imports_its_own_copy(tmp_path: Path, zygote: Zygote) -> None:
    function = _function(tmp_path, SEEN, "seen", zygote, timeout=30)
    (tmp_path / "code" / "boto3").mkdir()
    (tmp_path / "code" / "boto3" / "__init__.py").write_text("")
    try:
        seen = function.invoke({})
        assert seen["boto3"] == str(tmp_path / "code" / "boto3" / "__init__.py")
        assert seen["parent"] == os.getpid()  # a process of its own, not a fork of the zygote's
    finally:
        function.stop()


@pytest.mark.parametrize("forked", [False, True], ids=["own process", "forked"])
def test_the_functions_code_is_compiled_once_into_the_hosts_folder_and_not_into_its_asset(
    tmp_path: Path, zygote: Zygote, forked: bool
) -> None:
    bytecode = tmp_path / "bytecode"
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "shared_module.py").write_text("VALUE = 7\n")
    source = "import shared_module\n\n\ndef handler(event, context):\n    return shared_module.VALUE\n"
    first = _function(tmp_path, source, "first", zygote if forked else None, timeout=30, bytecode=bytecode)
    second = _function(tmp_path, source, "second", zygote if forked else None, timeout=30, bytecode=bytecode)
    try:
        assert first.invoke({}) == 7
        compiled = list(bytecode.rglob("shared_module.*.pyc"))
        assert len(compiled) == 1
        written = compiled[0].stat().st_mtime_ns
        assert second.invoke({}) == 7
        assert compiled[0].stat().st_mtime_ns == written  # the second function read the first one's
        assert not list((tmp_path / "code").rglob("*.pyc"))  # the asset stays as synthesized
    finally:
        first.stop()
        second.stop()


SHARED_HANDLER = """
import os

import shared.models

HANDLER_IMPORTED_IN = os.getpid()


def report(event, context):
    return {"models": shared.models.IMPORTED_IN, "handler": HANDLER_IMPORTED_IN, "pid": os.getpid(),
            "colour": os.environ.get("COLOUR")}


def layered(event, context):
    from shared import needs_a_layer  # its package is in no layer here: the import fails, as in AWS
"""


def _shared(code: Path, handler: str, zygote: Zygote, log: Path) -> WarmFunction:
    bundled = BundledFunction(handler, f"arn:aws:lambda:us-east-1:1:function:{handler}", f"fn.handler.{handler}",
                              code, (), {"COLOUR": "teal"}, "", timeout=30)  # fmt: skip
    return WarmFunction(bundled, endpoint="http://127.0.0.1:1", region="us-east-1", log=log, credentials=None,
                        zygote=zygote)  # fmt: skip


def test_a_zygote_of_the_functions_shared_asset_imports_what_their_handlers_import_from_it_and_no_more(
    tmp_path: Path,
) -> None:
    """The functions share one code asset: the zygote imports the modules of it their handlers import (from the
    asset's files), so each function's process does not import them again; the handler module itself, whose
    Powertools objects read the function's environment, is imported in the function's own process. A module
    needing what only a layer holds is left to the function, which fails on it as it would in AWS; a function of
    another folder gets a process of its own."""
    code = tmp_path / "asset"
    (code / "shared").mkdir(parents=True)
    (code / "shared" / "__init__.py").write_text("")
    (code / "shared" / "models.py").write_text("import os\n\nIMPORTED_IN = os.getpid()\n")
    (code / "shared" / "needs_a_layer.py").write_text("import package_of_a_layer\n")
    (code / "fn").mkdir()
    (code / "fn" / "__init__.py").write_text("")
    (code / "fn" / "handler.py").write_text(SHARED_HANDLER)
    (code / "fn" / "other.py").write_text("import shared.needs_a_layer\n")  # the zygote's import of it fails
    zygote = Zygote(tmp_path / "zygote.log", code=code, handlers=["fn.handler", "fn.other"])
    report = _shared(code, "report", zygote, tmp_path / "report.log")
    layered = _shared(code, "layered", zygote, tmp_path / "layered.log")
    (tmp_path / "elsewhere").mkdir()
    elsewhere = _function(tmp_path / "elsewhere", SEEN, "seen", zygote, timeout=30)
    try:
        seen = report.invoke({})
        assert seen["models"] == zygote._process.pid  # imported once, in the zygote, from the asset
        assert seen["handler"] == seen["pid"] != zygote._process.pid  # the handler: in the function's process
        assert seen["colour"] == "teal"
        with pytest.raises(FunctionError) as missing:
            layered.invoke({})
        assert (missing.value.error_type, missing.value.error_message) == (
            "ModuleNotFoundError",
            "No module named 'package_of_a_layer'",
        )
        assert elsewhere.invoke({})["parent"] == os.getpid()  # another asset: a process of its own
    finally:
        for function in (report, layered, elsewhere):
            function.stop()
        zygote.stop()


LAYERED_HANDLER = """
import os

import typing_extensions

import shared.needs_a_layer


def handler(event, context):
    return {"needs_a_layer": shared.needs_a_layer.IMPORTED_IN, "typing_extensions": typing_extensions.__file__,
            "pid": os.getpid(), "parent": os.getppid()}
"""


def test_a_zygote_with_the_functions_layers_forks_them_with_the_layers_packages_and_the_modules_that_need_them(
    tmp_path: Path,
) -> None:
    """A layer holding a package the first zygote imported from the runtime (the OpenLineage layer's
    ``typing_extensions``) would be shadowed in a child of that zygote: such a function gets a zygote of its
    layers, which imports the layer's copy and, from the shared asset, the modules needing the layer; a function
    without those layers is not forked from it, nor the layered one from the first."""
    import shutil

    import typing_extensions

    code = tmp_path / "asset"
    (code / "shared").mkdir(parents=True)
    (code / "shared" / "__init__.py").write_text("")
    (code / "shared" / "models.py").write_text("import os\n\nIMPORTED_IN = os.getpid()\n")
    (code / "shared" / "needs_a_layer.py").write_text(
        "import os\n\nimport package_of_a_layer\n\nIMPORTED_IN = os.getpid()\n"
    )
    (code / "fn").mkdir()
    (code / "fn" / "__init__.py").write_text("")
    (code / "fn" / "handler.py").write_text(SHARED_HANDLER)
    (code / "fn" / "layered.py").write_text(LAYERED_HANDLER)
    layer = tmp_path / "layer" / "python"
    (layer / "package_of_a_layer").mkdir(parents=True)
    (layer / "package_of_a_layer" / "__init__.py").write_text("")
    shutil.copy(typing_extensions.__file__, layer / "typing_extensions.py")
    plain = Zygote(tmp_path / "zygote.log", code=code, handlers=["fn.handler"])
    with_layer = Zygote(tmp_path / "zygote1.log", code=code, handlers=["fn.handler", "fn.layered"], layers=(layer,))
    bundled = BundledFunction("layered", "arn:aws:lambda:us-east-1:1:function:layered", "fn.layered.handler", code,
                              (layer,), {}, "", timeout=30)  # fmt: skip
    functions = [
        WarmFunction(
            bundled,
            endpoint="http://127.0.0.1:1",
            region="us-east-1",
            log=tmp_path / f"{name}.log",
            credentials=None,
            zygote=zygote,
        )
        for name, zygote in (("forked", with_layer), ("own", plain))
    ]
    report = _shared(code, "report", with_layer, tmp_path / "report.log")
    try:
        forked = functions[0].invoke({})
        assert forked["parent"] == with_layer._process.pid
        assert forked["needs_a_layer"] == with_layer._process.pid  # imported once, in the layers' zygote
        assert forked["typing_extensions"] == str(layer / "typing_extensions.py")  # the layer's copy
        own = functions[1].invoke({})
        assert own["parent"] == os.getpid()  # the first zygote's typing_extensions is not the layer's
        assert own["typing_extensions"] == str(layer / "typing_extensions.py")
        seen = report.invoke({})  # no layers: not forked from it either (it has imported shared.models)
        assert seen["models"] == seen["pid"] != with_layer._process.pid
    finally:
        for function in (*functions, report):
            function.stop()
        plain.stop()
        with_layer.stop()
