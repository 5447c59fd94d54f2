"""The deployed functions run from their bundled assets, as Lambda runs them.

Each environment runs in a Python process of its own (forked from a zygote that has imported what the
functions share: ``Zygote``) whose working folder is the function's code asset from
the cloud assembly (``asset.<hash>``, what ``cdk deploy`` uploads), with the environment variables the
deployed function has (the template's, references resolved by CloudFormation), the endpoint of the
rehearsal as its AWS, and only the packages the function has in AWS importable: the Python runtime's
AWS SDK, the public Powertools layer's packages and, for a function with it, the OpenLineage layer's
folder from the assembly. A module the function's code imports and AWS would not have fails here as it
would there (``ModuleNotFoundError``), instead of being found in this machine's virtualenv.

An invocation that runs past the function's ``Timeout`` is stopped with its environment and fails with
``Sandbox.Timedout``, as Lambda's does. Known differences, on purpose: the process runs this machine's
Python (3.11, not the runtime's 3.13), X-Ray tracing is off (no daemon), and memory sizes are not enforced.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from lakeline.aws.distributions import AWS_SDK, POWERTOOLS_LAYER
from lakeline.errors import LakelineError
from lakeline.runtimes.deployed.local_aws import timings
from lakeline.runtimes.deployed.local_aws.holds import Holds
from lakeline.runtimes.deployed.local_aws.iam import Credentials
from lakeline.runtimes.deployed.local_aws.pollers import Pollers

# The distributions a function has in AWS besides its code: the runtime's AWS SDK and the public
# Powertools layer (stacks.constructs.bundling.PROVIDED_DISTRIBUTIONS names the same).
PROVIDED = [
    *AWS_SDK,
    *POWERTOOLS_LAYER,
    "typing-extensions",
    "typing-inspection",
]

# The function's process: only the provided distributions importable besides its code and layers, then one
# event a line on ``events`` and one reply a line on ``results``. ``serve`` runs in a process of its own
# (``RUNNER``) or in a child forked by the zygote (``ZYGOTE``).
COMMON = r"""
import importlib, importlib.abc, importlib.machinery, importlib.metadata, json, os, sys, sysconfig, time, traceback

venv = sysconfig.get_paths()["purelib"]
owners = importlib.metadata.packages_distributions()
allowed = set()


def canonical(name):
    return name.lower().replace("_", "-")


class DeployedPath(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if "." in name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name)
        where = spec and (spec.origin or next(iter(spec.submodule_search_locations or []), "")) or ""
        if where.startswith(venv) and not {canonical(d) for d in owners.get(name, [])} & allowed:
            raise ModuleNotFoundError(f"No module named {name!r} (not in the function's runtime or layers)")
        return None


sys.meta_path.insert(0, DeployedPath())
# This machine's editable install of the repository is no part of a function: its code comes from its asset.
sys.meta_path[:] = [finder for finder in sys.meta_path if "__editable__" not in getattr(finder, "__module__", "")]
sys.path[:] = [entry for entry in sys.path if "__editable__" not in entry]


def serve(config, events, results):
    # After the code folder, before the runtime's packages, like /opt/python. Lambda merges layers into /opt
    # in the order the function lists them, a later layer's file replacing an earlier one's: the last first.
    sys.path[1:1] = list(reversed(config["layers"]))
    if config.get("bytecode"):
        # The functions share one code asset: its modules are compiled once for all of them, into a folder
        # of the host's (Lambda compiles on each cold start; the asset itself is left as synthesized).
        sys.pycache_prefix = config["bytecode"]
        sys.dont_write_bytecode = False

    class Context:
        function_name = config["function"]
        function_version = "$LATEST"
        invoked_function_arn = config["arn"]
        memory_limit_in_mb = 1024
        aws_request_id = "rehearsal"
        log_group_name = "/aws/lambda/" + config["function"]
        log_stream_name = "rehearsal"

        def __init__(self):
            self.deadline = time.monotonic() + config["timeout"]

        def get_remaining_time_in_millis(self):  # what is left of the function's timeout, as in Lambda
            return max(0, int((self.deadline - time.monotonic()) * 1000))

    handler = None
    for line in events:  # one event a line; the process lives on between them, as a warm Lambda does
        try:
            if handler is None:  # imported on the first event (an import error is that invocation's error)
                module_name, _, function = config["handler"].rpartition(".")
                handler = getattr(importlib.import_module(module_name), function)
            reply = {"result": handler(json.loads(line), Context())}
        except Exception as error:  # what Lambda's runtime reports of an unhandled error
            traceback.print_exc()
            reply = {"errorMessage": str(error), "errorType": type(error).__name__}
        sys.stdout.flush()
        sys.stderr.flush()
        results.write(json.dumps(reply, default=str) + "\n")
        results.flush()
"""

RUNNER = (
    COMMON
    + r"""
config = json.loads(sys.argv[1])
allowed.update(config["allowed"])
serve(config, sys.stdin, os.fdopen(int(sys.argv[2]), "w"))
"""
)

# The zygote: the provided distributions imported once (what Lambda's runtime and the layers hold) and, from the
# functions' shared code asset, the modules their handlers import (never a handler module), then a child forked
# per function environment, which takes the function's environment variables, folder, layers and descriptors
# before it imports the handler from its asset.
ZYGOTE = (
    COMMON
    + r"""
import ast, signal, socket, threading

setup = json.loads(sys.argv[1])
allowed.update(setup["allowed"])
# The layers of the functions it forks, where their functions have them (serve puts them there again): a
# package of a layer's, such as the OpenLineage layer's typing_extensions, is imported from the layer.
sys.path[1:1] = list(reversed(setup.get("layers", [])))
for preloaded in setup["preload"]:
    try:
        importlib.import_module(preloaded)
    except ImportError:
        pass  # not provided here: the function that imports it finds it missing, as it would anyway
code = setup.get("code")
if code:
    # The code asset the functions share, as its own: the modules of it their handlers import (not the handlers,
    # whose Powertools objects read the function's environment), from the asset's files and compiled into the
    # host's bytecode folder, as the function would. One that needs a layer's package fails here and is left to
    # the function; none reads the environment or starts a thread at import (each child takes its own).
    os.chdir(code)
    sys.path.insert(0, code)
    if setup.get("bytecode"):
        sys.pycache_prefix = setup["bytecode"]
        sys.dont_write_bytecode = False
    for handler_module in setup["handlers"]:
        source = os.path.join(code, *handler_module.split(".")) + ".py"
        try:
            tree = ast.parse(open(source).read())
        except (OSError, SyntaxError):
            continue
        for node in tree.body:  # what the handler imports when it is imported (not in functions, not for types)
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            else:
                names = []
            for name in names:
                if name.split(".")[0] in setup["code_packages"] and not name.endswith(".handler"):
                    try:
                        importlib.import_module(name)
                    except Exception:
                        pass  # the function imports it itself, and fails there if it must
    sys.path.remove(code)
control = socket.socket(fileno=int(sys.argv[2]))
loaded = sorted({name.split(".")[0] for name in sys.modules})
# The top-level packages of the code asset and the layers: a function of that asset with those layers imports
# the same files (no shadowing).
own_folders = tuple(folder + os.sep for folder in [*([code] if code else []), *setup.get("layers", [])])
owned = {
    name.split(".")[0]
    for name, module in list(sys.modules.items())
    if own_folders and str(getattr(module, "__file__", None) or "").startswith(own_folders)
}
state = {"modules": loaded, "code_modules": sorted(owned), "threads": threading.active_count()}
control.send(json.dumps(state).encode())
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the children
sys.stdout.flush()
sys.stderr.flush()
while True:
    message, fds, _, _ = socket.recv_fds(control, 1 << 20, 3)
    if not message:
        os._exit(0)  # the host is gone
    request = json.loads(message)
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        control.send(json.dumps({"pid": pid}).encode())
        continue
    try:
        control.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        events_fd, log_fd, results_fd = fds
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        os.environ.clear()
        os.environ.update(request["environment"])
        os.chdir(request["cwd"])
        importlib.invalidate_caches()
        serve(request["config"], os.fdopen(events_fd), os.fdopen(results_fd, "w"))
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)
"""
)

# What the zygote imports: the provided distributions' modules the functions use, the slow ones first
# (aws_xray_sdk.core makes botocore clients at import; pydantic and boto3 are large).
PRELOAD = (
    "aws_xray_sdk.core",
    "boto3",
    "boto3.session",
    "boto3.dynamodb.types",
    "botocore.session",
    "botocore.client",
    "botocore.config",
    "botocore.exceptions",
    "pydantic",
    "pydantic_core",
    "aws_lambda_powertools",
    "aws_lambda_powertools.logging",
    "aws_lambda_powertools.metrics",
    "aws_lambda_powertools.tracing",
    "aws_lambda_powertools.utilities.typing",
    "aws_lambda_powertools.utilities.batch",
    "aws_lambda_powertools.utilities.batch.types",
    "aws_lambda_powertools.utilities.data_classes",
    "aws_lambda_powertools.utilities.parser.models",
)


class FunctionError(LakelineError):
    """The function raised, as Lambda reports an unhandled error: ``error_type`` is the exception's class
    name (``Runtime.ExitError`` when the process died without one), ``error_message`` its message."""

    def __init__(self, message: str, *, error_type: str = "Runtime.ExitError", error_message: str = "") -> None:
        super().__init__(message)
        self.error_type = error_type
        self.error_message = error_message or message


@dataclass(frozen=True)
class BundledFunction:
    name: str
    arn: str
    handler: str
    code: Path
    layers: tuple[Path, ...]
    environment: dict[str, str]
    role: str
    timeout: int = 3
    """Seconds an invocation may run (the function's ``Timeout``; Lambda's default is 3)."""


def bundled_functions(assembly: Path, lambda_client: Any) -> dict[str, BundledFunction]:
    """Each deployed function with the asset folders its template names (code, and layers' ``python``)."""
    assets: dict[str, Path] = {}  # the template's logical id → its code asset; layer logical id → its folder
    layer_assets: dict[str, Path] = {}
    for template_path in assembly.glob("*.template.json"):
        for logical_id, resource in json.loads(template_path.read_text())["Resources"].items():
            key = resource.get("Properties", {}).get("Code", resource.get("Properties", {}).get("Content", {}))
            s3_key = key.get("S3Key") if isinstance(key, dict) else None
            if isinstance(s3_key, str) and s3_key.endswith(".zip"):
                folder = assembly / f"asset.{s3_key.removesuffix('.zip')}"
                (layer_assets if resource["Type"] == "AWS::Lambda::LayerVersion" else assets)[logical_id] = folder
    found: dict[str, BundledFunction] = {}
    for page in lambda_client.get_paginator("list_functions").paginate():
        for function in page["Functions"]:
            name = function["FunctionName"]
            logical = [logical_id for logical_id in assets if f"-{logical_id}" in name]
            if not logical:
                continue
            layers = tuple(
                folder / "python"
                for layer in function.get("Layers", [])
                for logical_id, folder in layer_assets.items()
                if logical_id in layer["Arn"] and (folder / "python").is_dir()
            )
            found[name] = BundledFunction(
                name,
                function["FunctionArn"],
                function["Handler"],
                assets[logical[0]],
                layers,
                dict(function.get("Environment", {}).get("Variables", {})),
                function["Role"],
                int(function.get("Timeout", 3)),
            )
    return found


class Zygote:
    """Forks the functions' processes from one that has imported the provided distributions (``PRELOAD``)
    once, rather than each function's process importing them anew (about a second each on a busy machine),
    and, when the functions share one code asset (``code``), the modules of it their handlers import (half a
    second each: the product's models and the packages they use), from the asset's own files. Started at once,
    so its imports run while the rest of the stand-up does. Each child takes its function's environment
    variables, folder and layers before it imports anything else of the function's, and its handler module
    itself, so the function's code still comes from its asset only (a file missing there fails as in AWS). A
    function whose code is another folder, or whose code or layers hold a module of the same name as one the
    zygote has imported from elsewhere, gets a process of its own (``fork`` answers ``None``): there its own
    copy is the one imported, as in Lambda. A zygote forks only functions with its ``layers`` (the host starts
    one per set of layers: the OpenLineage layer's ``typing_extensions`` would shadow the first's)."""

    def __init__(
        self,
        log: Path,
        *,
        code: Path | None = None,
        handlers: Sequence[str] = (),
        bytecode: Path | None = None,
        layers: tuple[Path, ...] = (),
    ) -> None:
        """``code``: the functions' shared code asset, whose modules that ``handlers`` (module names) import are
        imported too, compiled into ``bytecode``; ``layers``: the layers of the functions it forks, on its path
        as on theirs."""
        log.parent.mkdir(parents=True, exist_ok=True)
        self._control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._folder = tempfile.TemporaryDirectory(prefix="lakeline-zygote-")  # nothing importable from it
        self.code = code
        self.layers = layers
        setup: dict[str, Any] = {
            "allowed": sorted(PROVIDED),
            "preload": list(PRELOAD),
            "layers": [str(layer) for layer in layers],
        }
        if code is not None:
            packages = sorted(entry.name for entry in code.iterdir() if (entry / "__init__.py").is_file())
            setup |= {
                "code": str(code),
                "code_packages": packages,
                "handlers": list(handlers),
                "bytecode": str(bytecode) if bytecode else None,
            }
        environment = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.environ.get("HOME", "/tmp"),
            "AWS_LAMBDA_FUNCTION_NAME": "zygote",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
        }
        with log.open("a") as output:
            self._process = subprocess.Popen(
                [sys.executable, "-c", ZYGOTE, json.dumps(setup), str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=self._folder.name,
                env=environment,
                pass_fds=(theirs.fileno(),),
            )
        theirs.close()
        self._lock = threading.Lock()
        self._loaded: set[str] | None = None
        self._code_modules: set[str] = set()
        self._broken = False

    def fork(
        self, function: BundledFunction, environment: dict[str, str], config: dict[str, Any], fds: list[int]
    ) -> int | None:
        """The pid of a child running ``serve`` for ``function`` with descriptors ``fds`` (events in, output,
        results out), or ``None`` when the function needs a process of its own or the zygote is gone."""
        with self._lock:
            loaded = self._ready()
            if loaded is None or (self.code is not None and function.code != self.code):
                return None
            if function.layers != self.layers:
                return None
            if _shadows(function, loaded - self._code_modules):  # what came from its own asset shadows nothing
                return None
            request = {"environment": environment, "cwd": str(function.code), "config": config}
            try:
                socket.send_fds(self._control, [json.dumps(request).encode()], fds)
                reply = self._control.recv(4096)
            except OSError:
                reply = b""
            if not reply:
                self._broken = True
                return None
            return int(json.loads(reply)["pid"])

    def _ready(self) -> set[str] | None:
        if self._loaded is None and not self._broken:
            try:
                reply = self._control.recv(1 << 20)
            except OSError:
                reply = b""
            state = json.loads(reply) if reply else None
            # Forking a process with threads would copy their locks held: such a zygote is not used.
            if state is None or state["threads"] != 1:
                self._broken = True
            else:
                self._loaded = set(state["modules"])
                self._code_modules = set(state.get("code_modules", []))
        return None if self._broken else self._loaded

    def stop(self) -> None:
        with self._lock:
            self._broken = True
            self._control.close()
            self._process.kill()
            self._process.wait()
            self._folder.cleanup()


def _shadows(function: BundledFunction, loaded: set[str]) -> bool:
    """Whether the function's code or a layer of it holds a top-level module the zygote has imported."""
    for folder in (function.code, *function.layers):
        for entry in folder.iterdir() if folder.is_dir() else ():
            if entry.name.split(".")[0] in loaded and (entry.is_dir() or entry.suffix in {".py", ".so", ".pyc"}):
                return True
    return False


class _Process:
    """A function's process: started here (``popen``) or forked by the zygote (``pidfd``: not this
    process's child, so watched and stopped through a pidfd); ``events`` is its standard input."""

    def __init__(self, events: IO[str], *, popen: subprocess.Popen[str] | None = None, pidfd: int | None = None):
        self.events = events
        self.popen = popen
        self.pidfd = pidfd

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        if self.pidfd is None:
            return False
        ready, _, _ = select.select([self.pidfd], [], [], 0)
        return not ready  # a pidfd is readable once its process has exited

    def exit_status(self) -> str:
        if self.popen is not None:
            return f"exited with {self.popen.wait()}"
        return "exited"

    def stop(self) -> None:
        if self.popen is not None:
            self.popen.kill()
            self.popen.wait()
        elif self.pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            select.select([self.pidfd], [], [], 5)  # gone before the next environment starts
            os.close(self.pidfd)
            self.pidfd = None
        with contextlib.suppress(OSError):
            self.events.close()


class WarmFunction:
    """One function's execution environment: a process started on the first invocation and reused by the
    next ones (module state, such as cached clients, survives between them, as in a warm Lambda), one
    invocation at a time. Its output (the function's logs) goes to ``log``. With a ``zygote``, the
    process is forked from it (``Zygote``) instead of started anew; with ``bytecode``, the modules it imports
    are compiled into that folder, shared by the host's functions."""

    def __init__(
        self,
        function: BundledFunction,
        *,
        endpoint: str,
        region: str,
        log: Path,
        credentials: Credentials | None,
        zygote: Zygote | None = None,
        bytecode: Path | None = None,
    ) -> None:
        self.function = function
        self.bytecode = bytecode
        self.endpoint = endpoint
        self.region = region
        self.log = log
        self.credentials = credentials
        self.zygote = zygote
        self._process: _Process | None = None
        self._results: Any = None
        self._lock = threading.Lock()

    def invoke(self, event: Any) -> Any:
        """Run the handler on ``event``; its result, or ``FunctionError``."""
        with self._lock:
            warm = self._process is not None and self._process.alive()
            began = time.perf_counter()
            process = self._process if self._process is not None and warm else self._start()
            try:
                process.events.write(json.dumps(event) + "\n")
                process.events.flush()
                ready, _, _ = select.select([self._results], [], [], self.function.timeout)
                line = self._results.readline() if ready else None
            except BrokenPipeError:
                line = ""
            if line is None:  # past the function's timeout: Lambda stops the environment, as here
                process.stop()
                self._process = None
                seconds = f"{self.function.timeout:.2f}"
                raise FunctionError(
                    f"{self.function.name}: Task timed out after {seconds} seconds (log: {self.log})",
                    error_type="Sandbox.Timedout",
                    error_message=f"Task timed out after {seconds} seconds",
                )
            if not line:  # the process died: the next invocation gets a new one, like a new environment
                status = process.exit_status()
                process.stop()
                self._process = None
                raise FunctionError(
                    f"{self.function.name} {status}; its log: {self.log}", error_type="Runtime.ExitError"
                )
            reply = json.loads(line)
            what = "function: warm invocation" if warm else "function: first invocation (process, imports)"
            timings.record(what, time.perf_counter() - began, self.function.name)
        if "result" in reply:
            return reply["result"]
        raise FunctionError(
            f"{self.function.name} failed: {reply['errorType']}: {reply['errorMessage']} (log: {self.log})",
            error_type=reply["errorType"],
            error_message=reply["errorMessage"],
        )

    def stop(self) -> None:
        with self._lock:
            if self._process is not None:
                self._process.stop()
                self._process = None
            if self._results is not None:
                self._results.close()
                self._results = None

    def _start(self) -> _Process:
        if self._process is not None:
            self._process.stop()  # a dead environment's pipe and pidfd
            self._process = None
        function = self.function
        environment = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.environ.get("HOME", "/tmp"),
            **function.environment,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            **(self.credentials or Credentials("rehearsal", "rehearsal")).environment(),
            "AWS_LAMBDA_FUNCTION_NAME": function.name,
            "POWERTOOLS_TRACE_DISABLED": "true",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
        }
        config = {
            "function": function.name,
            "arn": function.arn,
            "handler": function.handler,
            "timeout": function.timeout,
            "layers": [str(layer) for layer in function.layers],
            "allowed": sorted(PROVIDED),
            "bytecode": str(self.bytecode) if self.bytecode else None,
        }
        read, write = os.pipe()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("a") as log:
            process = self._forked(environment, config, log.fileno(), write)
            if process is None:
                popen = subprocess.Popen(
                    [sys.executable, "-c", RUNNER, json.dumps(config), str(write)],
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=function.code,
                    env=environment,
                    text=True,
                    pass_fds=(write,),
                )
                assert popen.stdin is not None
                process = _Process(popen.stdin, popen=popen)
        os.close(write)
        if self._results is not None:
            self._results.close()
        self._results = os.fdopen(read)
        self._process = process
        return process

    def _forked(self, environment: dict[str, str], config: dict[str, Any], log: int, results: int) -> _Process | None:
        if self.zygote is None:
            return None
        events_in, events = os.pipe()
        try:
            pid = self.zygote.fork(self.function, environment, config, [events_in, log, results])
        finally:
            os.close(events_in)
        if pid is None:
            os.close(events)
            return None
        try:
            pidfd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:  # gone already: its results pipe is closed, and the invocation says so
            pidfd = None
        return _Process(os.fdopen(events, "w"), pidfd=pidfd)


class FunctionHost:
    """Serves moto's Lambda invocations (event source mappings, rule targets, ``Invoke``) with the bundled
    functions, each in its warm environment (``WarmFunction``): installed in the process that runs the
    moto server. Each function's output is in ``logs/<function>.log``."""

    def __init__(
        self,
        assembly: Path,
        endpoint: str,
        region: str,
        lambda_client: Any,
        *,
        account: str,
        logs: Path | None = None,
        role_credentials: Callable[[str, str], Credentials] | None = None,
    ) -> None:
        """``role_credentials(role ARN, session name)``: the credentials a function acts with (IAM
        enforced); without it, functions sign with a placeholder key."""
        self.functions = bundled_functions(assembly, lambda_client)
        self.logs = logs or Path(tempfile.mkdtemp(prefix="lakeline-functions-"))
        # Started now: their imports run while the stand-up goes on, before the first invocation. One per set of
        # layers among the functions of the shared code asset (the functions without a layer first).
        shared = Counter(function.code for function in self.functions.values()).most_common(1)
        code = shared[0][0] if shared else None
        layer_sets = sorted({function.layers for function in self.functions.values() if function.code == code} | {()})
        self.zygotes = {
            layers: Zygote(
                self.logs / f"zygote{index or ''}.log",
                code=code,
                handlers=sorted(
                    {
                        function.handler.rpartition(".")[0]
                        for function in self.functions.values()
                        if function.code == code and function.layers == layers
                    }
                ),
                bytecode=self.logs / "bytecode",
                layers=layers,
            )
            for index, layers in enumerate(layer_sets)
        }
        self.environments = {
            name: WarmFunction(
                function,
                endpoint=endpoint,
                region=region,
                log=self.logs / f"{name}.log",
                credentials=role_credentials(function.role, name) if role_credentials else None,
                zygote=self.zygotes.get(function.layers, self.zygotes[()]),
                bytecode=self.logs / "bytecode",
            )
            for name, function in self.functions.items()
        }
        self.invocations: list[tuple[str, Any, Any]] = []
        """(function, event, result or the error) of each invocation, in order."""
        self._uninstall: Callable[[], None] = lambda: None
        self._holds = Holds()
        self.pollers = Pollers(account, region)
        """Lambda's SQS pollers: the queues' messages delivered to these functions apart from their senders."""

    def held(self, name_part: str) -> contextlib.AbstractContextManager[threading.Event]:
        """Inside the block, an invocation of a function whose name contains ``name_part`` waits before its
        handler runs until the block ends, as a slow batch would keep it (a test asserts what goes on
        meanwhile); the event yielded is set once one waits."""
        return self._holds.held(name_part)

    def invoke(self, name: str, event: Any) -> Any:
        """Run function ``name`` on ``event``, recorded in ``invocations``; its result or ``FunctionError``."""
        environment = self.environments.get(name)
        if environment is None:
            raise FunctionError(f"{name} has no bundled asset in the cloud assembly")
        self._holds.wait_at(name, by_part=True)
        try:
            result = environment.invoke(event)
        except FunctionError as error:
            self.invocations.append((name, event, error))
            raise
        self.invocations.append((name, event, result))
        return result

    def stop(self) -> None:
        for environment in self.environments.values():
            environment.stop()
        for zygote in self.zygotes.values():
            zygote.stop()

    def install(self) -> None:
        import moto.awslambda.models as lambda_models

        host = self

        def run(model: Any, body: Any, request_headers: Any, response_headers: Any) -> bytes:
            try:
                # Lambda gives a function invoked without a payload (``aws lambda invoke`` without
                # ``--payload``) the event ``{}``.
                result = host.invoke(model.function_name, json.loads(body) if body else {})
            except FunctionError as error:
                response_headers["x-amz-function-error"] = "Unhandled"
                return json.dumps({"errorMessage": error.error_message, "errorType": error.error_type}).encode()
            return json.dumps(result).encode()

        original = lambda_models.LambdaFunction.invoke
        setattr(lambda_models.LambdaFunction, "invoke", run)  # noqa: B010
        self._uninstall = lambda: setattr(lambda_models.LambdaFunction, "invoke", original)
        self.pollers.install()

    def uninstall(self) -> None:
        """Let moto invoke and deliver as it does again (other users of this process), and stop the functions."""
        self.pollers.uninstall()
        self._uninstall()
        self.stop()

    def settle(self, timeout: float = 300.0) -> None:
        """Wait until no queue with a function has a message visible or being delivered (a delayed one may
        wait on; ``ExecutionHost.wait`` waits for everything, executions too)."""
        self.pollers.settle(timeout)
