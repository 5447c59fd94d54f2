"""``cdk synth`` itself, as a user runs it: offline, with cdk-nag's AwsSolutions checks at synth."""

from __future__ import annotations

import json
import os
import re
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


CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"

# checkov's findings on the templates `cdk synth` writes, each accepted for a reason (#40); any other finding fails.
# A real problem is fixed in stacks/ instead of being listed here.
CHECKOV_ACCEPTED: dict[str, tuple[str, str]] = {
    # check: (pattern the finding's resource, "<type>.<logical id>", must match whole; why it stays)
    "CKV_AWS_18": (
        r"AWS::S3::Bucket\.AccessLogsBucket[0-9A-F]{8}",
        "The access-log bucket is where the other buckets' access logs go: logging its own accesses into itself "
        "would log each log delivery, without end.",
    ),
    "CKV_AWS_21": (
        r"AWS::S3::Bucket\.AccessLogsBucket[0-9A-F]{8}",
        "The access-log bucket holds logs S3 writes once and nothing overwrites, expired after 365 days: versions "
        "would keep nothing more. Every bucket holding data is versioned.",
    ),
    "CKV_AWS_115": (
        r"AWS::Lambda::Function\..+",
        "Reserved concurrency would be carved out of the account's pool (new accounts have 10 in all, and a "
        "reservation that leaves under 10 unreserved fails the deploy) and would throttle state machine tasks "
        "into retries. Concurrency is bounded where it matters: each router's event source MaximumConcurrency "
        "(router_max_concurrency) and the run slots (RUNS_IN_FLIGHT) bound the executions whose tasks call the rest.",
    ),
    "CKV_AWS_116": (
        r"AWS::Lambda::Function\..+",
        "A function's DLQ catches only asynchronous invocations. Most are synchronous: SQS and DynamoDB stream "
        "event sources (the queues have DLQs, the streams on-failure queues) and state machine tasks (each write "
        "task's Catch parks the arrival). The asynchronous ones: the stranded-run end function has an on-failure "
        "destination (EventInvokeConfig, which checkov does not read); the stranded sweep and the nightly lineage "
        "schedule are periodic and the next run redoes a failed one's work (the schedule queues every root since "
        "the last trace); CDK's custom resource handlers report to CloudFormation. Every function's Errors alarm "
        "fires on a failure.",
    ),
    "CKV_AWS_117": (
        r"AWS::Lambda::Function\..+",
        "The functions call only AWS APIs (S3, DynamoDB, SQS, Step Functions, Athena, Glue) over TLS, "
        "authorized by IAM; a VPC would reach nothing private and cost NAT gateways or an interface endpoint per "
        "service and zone.",
    ),
    "CKV_AWS_173": (
        r"AWS::Lambda::Function\..+",
        "Lambda encrypts environment variables at rest with its AWS managed key; they hold resource names, "
        "queue URLs, ARNs and settings, no secrets, so a customer key would protect nothing more.",
    ),
}


def checkov_findings(templates: list[Path]) -> tuple[list[str], set[str]]:
    """checkov (its own venv, pinned in constraints-checkov.txt) over ``templates``: each finding not accepted in
    ``CHECKOV_ACCEPTED``, as "<template> <check> <resource>: <name>", and the accepted checks that were found."""
    assert CHECKOV.exists(), (
        f"{CHECKOV.relative_to(ROOT)} is missing: checkov runs from a venv of its own (its boto3 pin conflicts "
        "with constraints.txt), which `make test` creates (or `make checkov` alone)"
    )
    command = [str(CHECKOV), "--framework", "cloudformation", "--output", "json", "--quiet", "--skip-download"]
    # Offline: --skip-download skips the platform's guidelines; the variable, the check for a newer checkov on PyPI.
    env = {**os.environ, "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true"}
    result = subprocess.run(
        [*command, "--file", *map(str, templates)], capture_output=True, text=True, timeout=300, check=False, env=env
    )
    # Exit 1 means findings, reported in the JSON; anything else, or no JSON, is checkov failing to run.
    failed_to_run = f"checkov exited {result.returncode}: {result.stdout[-2000:]}{result.stderr[-4000:]}"
    assert result.returncode in (0, 1) and result.stdout.startswith("{"), failed_to_run
    report = json.loads(result.stdout)
    assert report["summary"]["parsing_errors"] == 0, report["summary"]
    assert report["summary"]["resource_count"] > 0, f"checkov read no resource: {report['summary']}"
    unexplained: list[str] = []
    used: set[str] = set()
    for finding in report.get("results", {}).get("failed_checks", []):
        check, resource = finding["check_id"], finding["resource"]
        accepted = CHECKOV_ACCEPTED.get(check)
        if accepted is not None and re.fullmatch(accepted[0], resource):
            used.add(check)
        else:
            template = Path(finding["file_abs_path"])
            unexplained.append(
                f"{template.parent.parent.name}/{template.name} {check} {resource}: {finding['check_name']}"
            )
    return unexplained, used


def test_checkov_finds_nothing_unexplained(synths: dict[str, tuple[int, str, Path]]) -> None:
    """checkov over the templates a user deploys, both engines' in one run (its start-up is most of its time)."""
    templates = []
    for engine in ENGINES:
        returncode, report, out = synths[engine]
        assert returncode == 0, report[-4000:]
        templates += sorted(out.glob("*.template.json"))
    assert len(templates) == 2 * len(ENGINES)
    findings, used = checkov_findings(templates)
    assert findings == [], "\n".join(findings)
    # An acceptance whose finding is gone (fixed in stacks/) goes too, so the list says only what is true.
    assert used == CHECKOV_ACCEPTED.keys(), f"no longer found: {sorted(CHECKOV_ACCEPTED.keys() - used)}"


def test_checkov_reports_what_it_finds(tmp_path: Path) -> None:
    """The check can fail: an unencrypted queue is reported, and so is a bucket without access logs unless it is
    the access-log bucket (an acceptance holds for the resources it names only)."""
    template = tmp_path / "synth" / "bad.template.json"
    template.parent.mkdir()
    bucket = {"Type": "AWS::S3::Bucket", "Properties": {"VersioningConfiguration": {"Status": "Enabled"}}}
    resources = {"Queue": {"Type": "AWS::SQS::Queue"}, "DataBucket": bucket, "AccessLogsBucket0123ABCD": bucket}
    template.write_text(json.dumps({"Resources": resources}))
    findings, used = checkov_findings([template])
    assert any(" CKV_AWS_27 AWS::SQS::Queue.Queue: " in finding for finding in findings), findings
    assert any(" CKV_AWS_18 AWS::S3::Bucket.DataBucket: " in finding for finding in findings), findings
    assert any(" CKV_AWS_53 AWS::S3::Bucket.AccessLogsBucket0123ABCD: " in finding for finding in findings), findings
    assert not any(" CKV_AWS_18 AWS::S3::Bucket.AccessLogsBucket0123ABCD: " in finding for finding in findings)
    assert "CKV_AWS_18" in used


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
