"""The local Glue endpoint through Glue's API (``lakeline.local.rehearsal.glue``): a run of the deployed
job runs its script from the asset with the job's arguments under the run's, as the job's role."""

from __future__ import annotations

import json
import time
from typing import Any

from lakeline.local.rehearsal.deploy import Deployment
from lakeline.local.rehearsal.glue import LocalGlue
from tests.rehearsal.support import without


def run_job(deployment: Deployment, arguments: dict[str, str]) -> dict[str, Any]:
    glue = deployment.client("glue")
    (name,) = glue.list_jobs()["JobNames"]
    run_id = glue.start_job_run(JobName=name, Arguments=arguments)["JobRunId"]
    while True:
        run: dict[str, Any] = glue.get_job_run(JobName=name, RunId=run_id)["JobRun"]
        if run["JobRunState"] not in ("STARTING", "RUNNING"):
            return run
        time.sleep(0.05)


def test_a_run_gets_the_job_s_default_arguments_under_its_own_and_fails_as_its_script_fails(
    deployment: Deployment, local_glue: LocalGlue
) -> None:
    run = run_job(deployment, {"--mode": "stage_c", "--plan": "{}"})
    assert run["JobRunState"] == "FAILED"
    assert run["ErrorMessage"].startswith("InvalidInputError: --mode must be one of ('stage_a', 'stage_b')")
    assert run["Arguments"]["--mode"] == "stage_c" and run["Arguments"]["--extra-py-files"].endswith(".zip")
    assert "CompletedOn" in run and run["GlueVersion"] == "5.0"


def test_a_job_role_that_cannot_read_its_script_fails_the_run(deployment: Deployment, local_glue: LocalGlue) -> None:
    """Glue reads the script and the library as the job's role (``grant_read`` of their assets)."""
    iam, glue = deployment.client("iam"), deployment.client("glue")
    (name,) = glue.list_jobs()["JobNames"]
    role = glue.get_job(JobName=name)["Job"]["Role"].rsplit("/", 1)[-1]
    policies = {
        policy: iam.get_role_policy(RoleName=role, PolicyName=policy)["PolicyDocument"]
        for policy in iam.list_role_policies(RoleName=role)["PolicyNames"]
    }
    try:
        for policy, document in policies.items():
            iam.put_role_policy(
                RoleName=role, PolicyName=policy, PolicyDocument=json.dumps(without(document, "s3:GetObject*"))
            )
        run = run_job(deployment, {"--mode": "stage_a", "--plan": "{}"})
    finally:
        for policy, document in policies.items():
            iam.put_role_policy(RoleName=role, PolicyName=policy, PolicyDocument=json.dumps(document))
    assert run["JobRunState"] == "FAILED"
    assert run["ErrorMessage"].startswith("LocalGlueError: cannot read s3://cdk-"), run["ErrorMessage"]
    assert "AccessDenied" in run["ErrorMessage"]
