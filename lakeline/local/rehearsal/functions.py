"""The deployed functions run from their bundled assets, as Lambda runs them.

Each invocation runs in a fresh Python process whose working folder is the function's code asset from
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

import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakeline.aws.distributions import AWS_SDK, POWERTOOLS_LAYER
from lakeline.errors import LakelineError
from lakeline.local.rehearsal import timings
from lakeline.local.rehearsal.iam import Credentials

# The distributions a function has in AWS besides its code: the runtime's AWS SDK and the public
# Powertools layer (stacks.constructs.bundling.PROVIDED_DISTRIBUTIONS names the same).
PROVIDED = [
    *AWS_SDK,
    *POWERTOOLS_LAYER,
    "typing-extensions",
    "typing-inspection",
]

RUNNER = r"""
import importlib, importlib.abc, importlib.machinery, importlib.metadata, json, os, sys, sysconfig, traceback

config = json.loads(sys.argv[1])
allowed = set(config["allowed"])
layers = config["layers"]
venv = sysconfig.get_paths()["purelib"]
owners = importlib.metadata.packages_distributions()
results = os.fdopen(int(sys.argv[2]), "w")


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
# After the code folder, before the runtime's packages, like /opt/python. Lambda merges layers into /opt in
# the order the function lists them, a later layer's file replacing an earlier one's: the last layer first.
sys.path[1:1] = list(reversed(layers))


class Context:
    function_name = config["function"]
    function_version = "$LATEST"
    invoked_function_arn = config["arn"]
    memory_limit_in_mb = 1024
    aws_request_id = "rehearsal"
    log_group_name = "/aws/lambda/" + config["function"]
    log_stream_name = "rehearsal"

    def get_remaining_time_in_millis(self):
        return config["timeout"] * 1000


handler = None
for line in sys.stdin:  # one event a line; the process lives on between them, as a warm Lambda does
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


class WarmFunction:
    """One function's execution environment: a process started on the first invocation and reused by the
    next ones (module state, such as cached clients, survives between them, as in a warm Lambda), one
    invocation at a time. Its output (the function's logs) goes to ``log``."""

    def __init__(
        self, function: BundledFunction, *, endpoint: str, region: str, log: Path, credentials: Credentials | None
    ) -> None:
        self.function = function
        self.endpoint = endpoint
        self.region = region
        self.log = log
        self.credentials = credentials
        self._process: subprocess.Popen[str] | None = None
        self._results: Any = None
        self._lock = threading.Lock()

    def invoke(self, event: Any) -> Any:
        """Run the handler on ``event``; its result, or ``FunctionError``."""
        with self._lock:
            warm = self._process is not None and self._process.poll() is None
            began = time.perf_counter()
            process = self._process if self._process and self._process.poll() is None else self._start()
            assert process.stdin is not None
            try:
                process.stdin.write(json.dumps(event) + "\n")
                process.stdin.flush()
                ready, _, _ = select.select([self._results], [], [], self.function.timeout)
                line = self._results.readline() if ready else None
            except BrokenPipeError:
                line = ""
            if line is None:  # past the function's timeout: Lambda stops the environment, as here
                process.kill()
                process.wait()
                self._process = None
                seconds = f"{self.function.timeout:.2f}"
                raise FunctionError(
                    f"{self.function.name}: Task timed out after {seconds} seconds (log: {self.log})",
                    error_type="Sandbox.Timedout",
                    error_message=f"Task timed out after {seconds} seconds",
                )
            if not line:  # the process died: the next invocation gets a new one, like a new environment
                process.wait()
                self._process = None
                raise FunctionError(
                    f"{self.function.name} exited with {process.returncode}; its log: {self.log}",
                    error_type="Runtime.ExitError",
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
                self._process.kill()
                self._process.wait()
                self._process = None
            if self._results is not None:
                self._results.close()
                self._results = None

    def _start(self) -> subprocess.Popen[str]:
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
        }
        read, write = os.pipe()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("a") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-c", RUNNER, json.dumps(config), str(write)],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=function.code,
                env=environment,
                text=True,
                pass_fds=(write,),
            )
        os.close(write)
        if self._results is not None:
            self._results.close()
        self._results = os.fdopen(read)
        return self._process


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
        logs: Path | None = None,
        role_credentials: Callable[[str, str], Credentials] | None = None,
    ) -> None:
        """``role_credentials(role ARN, session name)``: the credentials a function acts with (IAM
        enforced); without it, functions sign with a placeholder key."""
        self.functions = bundled_functions(assembly, lambda_client)
        self.logs = logs or Path(tempfile.mkdtemp(prefix="lakeline-functions-"))
        self.environments = {
            name: WarmFunction(
                function,
                endpoint=endpoint,
                region=region,
                log=self.logs / f"{name}.log",
                credentials=role_credentials(function.role, name) if role_credentials else None,
            )
            for name, function in self.functions.items()
        }
        self.invocations: list[tuple[str, Any, Any]] = []
        """(function, event, result or the error) of each invocation, in order."""
        self._uninstall: Callable[[], None] = lambda: None

    def invoke(self, name: str, event: Any) -> Any:
        """Run function ``name`` on ``event``, recorded in ``invocations``; its result or ``FunctionError``."""
        environment = self.environments.get(name)
        if environment is None:
            raise FunctionError(f"{name} has no bundled asset in the cloud assembly")
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

    def install(self) -> None:
        import moto.awslambda.models as lambda_models

        host = self

        def run(model: Any, body: Any, request_headers: Any, response_headers: Any) -> bytes:
            try:
                result = host.invoke(model.function_name, json.loads(body) if body else None)
            except FunctionError as error:
                response_headers["x-amz-function-error"] = "Unhandled"
                return json.dumps({"errorMessage": error.error_message, "errorType": error.error_type}).encode()
            return json.dumps(result).encode()

        original = lambda_models.LambdaFunction.invoke
        setattr(lambda_models.LambdaFunction, "invoke", run)  # noqa: B010
        self._uninstall = lambda: setattr(lambda_models.LambdaFunction, "invoke", original)

    def uninstall(self) -> None:
        """Let moto invoke functions as it does again (other users of this process), and stop them."""
        self._uninstall()
        self.stop()
