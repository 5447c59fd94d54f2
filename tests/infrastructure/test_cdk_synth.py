"""``cdk synth`` itself, as a user runs it: offline, with cdk-nag's AwsSolutions checks at synth."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


# cfn-lint's findings on the templates `cdk synth` writes, each accepted for a reason (#40); any other finding fails.
CFN_LINT_ACCEPTED: dict[str, tuple[str, str]] = {
    # rule: (what the finding's path starts with, why it stays)
    "W3005": (
        "Resources/",
        "CDK's own output: each function and state machine DependsOn its role and the role's default policy, so the "
        "policy exists before the first invocation; the role is also named by GetAtt, which cfn-lint calls redundant.",
    ),
    "W6001": (
        "Outputs/",
        "The pipeline stack re-outputs the storage stack's table and bucket names it imports on purpose: "
        "`lakeline status|reprocess|dlq --stack <pipeline>` reads every name it needs from that one stack.",
    ),
}


def cfn_lint_findings(template: Path) -> list[str]:
    from cfnlint.api import ManualArgs, lint_file

    matches = lint_file(template, config=ManualArgs(regions=["us-east-1"]))
    unexplained = []
    for match in matches:
        rule, path = match.rule.id, "/".join(str(part) for part in match.path)
        accepted = CFN_LINT_ACCEPTED.get(rule)
        if accepted is None or not path.startswith(accepted[0]):
            unexplained.append(f"{rule} {path}: {match.message}")
    return unexplained


@pytest.mark.parametrize("engine", ENGINES)
def test_cfn_lint_finds_nothing_unexplained(engine: str, synths: dict[str, tuple[int, str, Path]]) -> None:
    """cfn-lint (pinned in constraints.txt) over the templates a user deploys, both engines."""
    returncode, report, out = synths[engine]
    assert returncode == 0, report[-4000:]
    templates = sorted(out.glob("*.template.json"))
    assert len(templates) == 2
    findings = [f"{t.name}: {finding}" for t in templates for finding in cfn_lint_findings(t)]
    assert findings == [], "\n".join(findings)


def test_cfn_lint_reports_what_it_finds(tmp_path: Path) -> None:
    """The check can fail: a template with an unknown property and a bad reference is reported."""
    template = tmp_path / "bad.template.json"
    queue = {"Type": "AWS::SQS::Queue", "Properties": {"Nope": 1, "KmsMasterKeyId": {"Ref": "Gone"}}}
    template.write_text(json.dumps({"Resources": {"Q": queue}}))
    findings = cfn_lint_findings(template)
    assert any(finding.startswith("E3002") for finding in findings), findings
    assert any(finding.startswith("E1020") for finding in findings), findings


@pytest.mark.parametrize("engine", ENGINES)
def test_no_role_of_the_deployed_templates_may_touch_every_bucket(
    engine: str, synths: dict[str, tuple[int, str, Path]]
) -> None:
    """As ``test_costs_and_privilege`` checks in-process, on what ``cdk synth`` writes: cdk.json's feature flags
    (``minimizePolicies`` merges the Athena task's S3 reads on ``"*"`` with X-Ray's and Lake Formation's) apply
    here only (#40)."""
    returncode, report, out = synths[engine]
    assert returncode == 0, report[-4000:]
    checked = 0
    for template in out.glob("*.template.json"):
        for name, resource in json.loads(template.read_text())["Resources"].items():
            if resource["Type"] != "AWS::IAM::Policy":
                continue
            for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                resources = (
                    statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
                )
                s3 = [action for action in actions if action.startswith("s3:")]
                assert not (s3 and "*" in resources), f"{name}: {s3} on every bucket"
                checked += bool(s3)
    assert checked > 10


@pytest.mark.parametrize("engine", ENGINES)
def test_the_in_process_synth_makes_the_templates_cdk_synth_makes(
    engine: str, synths: dict[str, tuple[int, str, Path]]
) -> None:
    """The tests and the rehearsal synthesize in-process (``stacks.app.build_app``), without the CLI that gives the
    app cdk.json's feature flags: the flags are applied there too (``apply_feature_flags``), so what is tested
    and rehearsed is what is deployed (#40)."""
    from tests.infrastructure.test_stacks import synthesized

    def resources(template: dict[str, Any]) -> dict[str, Any]:
        # The CLI adds construct paths (Metadata) and its version record (CDKMetadata): not what is deployed.
        found = template["Resources"].items()
        return {key: {k: v for k, v in r.items() if k != "Metadata"} for key, r in found if key != "CDKMetadata"}

    returncode, report, out = synths[engine]
    assert returncode == 0, report[-4000:]
    for name, template in zip(("Storage", "Pipeline"), synthesized(engine), strict=True):
        deployed = resources(json.loads((out / f"Lakeline-dev-{name}.template.json").read_text()))
        tested = resources(template.to_json())
        differing = sorted(key for key in deployed.keys() | tested.keys() if deployed.get(key) != tested.get(key))
        assert not differing, f"{name}: {differing}"
