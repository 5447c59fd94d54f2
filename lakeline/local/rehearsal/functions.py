"""The deployed functions run from their bundled assets, as Lambda runs them.

Each invocation runs in a fresh Python process whose working folder is the function's code asset from
the cloud assembly (``asset.<hash>``, what ``cdk deploy`` uploads), with the environment variables the
deployed function has (the template's, references resolved by CloudFormation), the endpoint of the
rehearsal as its AWS, and only the packages the function has in AWS importable: the Python runtime's
AWS SDK, the public Powertools layer's packages and, for a function with it, the OpenLineage layer's
folder from the assembly. A module the function's code imports and AWS would not have fails here as it
would there (``ModuleNotFoundError``), instead of being found in this machine's virtualenv.

Known differences, on purpose: the process runs this machine's Python (3.11, not the runtime's 3.13),
X-Ray tracing is off (no daemon), and timeouts and memory sizes are not enforced.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakeline.errors import LakelineError

# The distributions a function has in AWS besides its code: the runtime's AWS SDK and the public
# Powertools layer (stacks.constructs.bundling.PROVIDED_DISTRIBUTIONS names the same).
PROVIDED = [
    "boto3",
    "botocore",
    "s3transfer",
    "jmespath",
    "urllib3",
    "python-dateutil",
    "six",
    "aws-lambda-powertools",
    "pydantic",
    "pydantic-core",
    "annotated-types",
    "aws-xray-sdk",
    "wrapt",
    "typing-extensions",
    "typing-inspection",
]

RUNNER = r"""
import importlib, importlib.abc, importlib.machinery, importlib.metadata, json, sys, sysconfig

config = json.loads(sys.argv[1])
allowed = set(config["allowed"])
layers = config["layers"]
venv = sysconfig.get_paths()["purelib"]
owners = importlib.metadata.packages_distributions()


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
sys.path[1:1] = layers  # after the code folder, before the runtime's packages, like /opt/python


class Context:
    function_name = config["function"]
    function_version = "$LATEST"
    invoked_function_arn = config["arn"]
    memory_limit_in_mb = 1024
    aws_request_id = "rehearsal"
    log_group_name = "/aws/lambda/" + config["function"]
    log_stream_name = "rehearsal"

    def get_remaining_time_in_millis(self):
        return 300000


module_name, _, function = config["handler"].rpartition(".")
handler = getattr(importlib.import_module(module_name), function)
event = json.loads(sys.stdin.read() or "null")
result = handler(event, Context())
sys.stdout.write("\n" + "LAKELINE-RESULT " + json.dumps(result, default=str))
"""


class FunctionError(LakelineError):
    """The function raised, as Lambda reports an unhandled error."""


@dataclass(frozen=True)
class BundledFunction:
    name: str
    arn: str
    handler: str
    code: Path
    layers: tuple[Path, ...]
    environment: dict[str, str]


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
            )
    return found


def invoke(function: BundledFunction, event: Any, *, endpoint: str, region: str) -> Any:
    """Run ``function``'s handler on ``event`` from its bundled asset; its result, or ``FunctionError``."""
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        **function.environment,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "AWS_ACCESS_KEY_ID": "rehearsal",
        "AWS_SECRET_ACCESS_KEY": "rehearsal",
        "AWS_LAMBDA_FUNCTION_NAME": function.name,
        "POWERTOOLS_TRACE_DISABLED": "true",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    config = {
        "function": function.name,
        "arn": function.arn,
        "handler": function.handler,
        "layers": [str(layer) for layer in function.layers],
        "allowed": PROVIDED,
    }
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps(config)],
        input=json.dumps(event),
        cwd=function.code,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    marker = "\nLAKELINE-RESULT "
    if done.returncode != 0 or marker not in done.stdout:
        raise FunctionError(f"{function.name} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.rsplit(marker, 1)[1])


class FunctionHost:
    """Serves moto's Lambda invocations (event source mappings, rule targets, ``Invoke``) with the bundled
    functions: installed in the process that runs the moto server."""

    def __init__(self, assembly: Path, endpoint: str, region: str, lambda_client: Any) -> None:
        self.functions = bundled_functions(assembly, lambda_client)
        self.endpoint = endpoint
        self.region = region
        self.invocations: list[tuple[str, Any, Any]] = []
        """(function, event, result or the error) of each invocation, in order."""

    def install(self) -> None:
        import moto.awslambda.models as lambda_models

        host = self

        def run(model: Any, body: Any, request_headers: Any, response_headers: Any) -> bytes:
            event = json.loads(body) if body else None
            function = host.functions.get(model.function_name)
            if function is None:
                raise FunctionError(f"{model.function_name} has no bundled asset in the cloud assembly")
            try:
                result = invoke(function, event, endpoint=host.endpoint, region=host.region)
            except FunctionError as error:
                host.invocations.append((function.name, event, error))
                response_headers["x-amz-function-error"] = "Unhandled"
                return json.dumps({"errorMessage": str(error), "errorType": "FunctionError"}).encode()
            host.invocations.append((function.name, event, result))
            return json.dumps(result).encode()

        setattr(lambda_models.LambdaFunction, "invoke", run)  # noqa: B010
