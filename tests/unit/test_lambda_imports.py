"""Every Lambda handler imports with only what the Lambda runtime and the Powertools layer provide.

The CDK app ships our code with ``Code.from_asset`` (no Docker) and takes third-party packages from the
public Powertools layer (boto3 and python-dateutil are in the runtime; pydantic and aws-xray-sdk in the
layer), plus the pure-Python packages the local bundling step vendors. A handler that imports anything
else would deploy fine and fail at its first invocation, so each one is imported here in a fresh
interpreter with the other packages made unavailable.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = sorted(path.parent.name for path in (ROOT / "lambdas").glob("*/handler.py"))
# sqlglot is vendored into the code asset (stacks/constructs/functions.py VENDORED_PACKAGES).
NOT_IN_LAMBDA = ["pyspark", "py4j", "typer", "rich", "yaml", "pyathena", "openlineage", "moto", "click"]

BLOCKER = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {NOT_IN_LAMBDA!r}:
            raise ModuleNotFoundError(f"{{name}} is not available in the Lambda runtime")
        return None
sys.meta_path.insert(0, Block())
import importlib
importlib.import_module(sys.argv[1])
"""


def test_there_are_handlers_to_check() -> None:
    assert "stage_a_router" in HANDLERS


@pytest.mark.parametrize("name", HANDLERS)
def test_handler_imports_with_only_the_lambda_runtime_and_powertools_layer(name: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", BLOCKER, f"lambdas.{name}.handler"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"AWS_DEFAULT_REGION": "us-east-1", "PATH": "/usr/bin:/bin", "POWERTOOLS_DEV": "false"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
