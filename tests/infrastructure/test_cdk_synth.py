"""``cdk synth`` itself, as a user runs it: offline, with cdk-nag's AwsSolutions checks at synth."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CDK = ROOT / "node_modules" / ".bin" / "cdk"


@pytest.mark.parametrize("engine", ["athena", "spark"])
def test_cdk_synth_is_clean(engine: str, tmp_path: Path) -> None:
    assert CDK.exists(), "the CDK CLI is installed by `make` from package.json (npm ci)"
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CDK_DISABLE_VERSION_CHECK": "1"}
    env.pop("CDK_DEFAULT_ACCOUNT", None)
    out = tmp_path / "cdk.out"
    result = subprocess.run(
        [str(CDK), "synth", "--quiet", "--no-notices", "-c", f"engine={engine}", "--output", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = result.stdout + result.stderr
    assert result.returncode == 0, report[-4000:]
    assert "ERROR" not in report, report[-4000:]
    assert sorted(p.name for p in out.glob("*.template.json")) == [
        "Lakeline-dev-Pipeline.template.json",
        "Lakeline-dev-Storage.template.json",
    ]
    shutil.rmtree(out)
