"""``cdk synth`` itself, as a user runs it: offline, with cdk-nag's AwsSolutions checks at synth."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CDK = ROOT / "node_modules" / ".bin" / "cdk"
ENGINES = ("athena", "spark")


@pytest.fixture(scope="module")
def synths(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[int, str, Path]]]:
    """``cdk synth`` of each engine, both started at once: each is mostly one process waiting on another (the
    CLI on the app, the app on its jsii runtime), so together they take little longer than one."""
    assert CDK.exists(), "the CDK CLI is installed by `make` from package.json (npm ci)"
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CDK_DISABLE_VERSION_CHECK": "1"}
    env.pop("CDK_DEFAULT_ACCOUNT", None)
    started = {}
    for engine in ENGINES:
        out = tmp_path_factory.mktemp(f"synth-{engine}") / "cdk.out"
        command = [str(CDK), "synth", "--quiet", "--no-notices", "-c", f"engine={engine}", "--output", str(out)]
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        started[engine] = (process, out)
    try:
        finished = {}
        for engine, (process, out) in started.items():
            report, _ = process.communicate(timeout=600)
            finished[engine] = (process.returncode, report, out)
        yield finished
    finally:
        for process, out in started.values():
            process.kill()  # one left running by a failure above
            process.wait()
            shutil.rmtree(out, ignore_errors=True)


@pytest.mark.parametrize("engine", ENGINES)
def test_cdk_synth_is_clean(engine: str, synths: dict[str, tuple[int, str, Path]]) -> None:
    returncode, report, out = synths[engine]
    assert returncode == 0, report[-4000:]
    assert "ERROR" not in report, report[-4000:]
    assert sorted(p.name for p in out.glob("*.template.json")) == [
        "Lakeline-dev-Pipeline.template.json",
        "Lakeline-dev-Storage.template.json",
    ]
