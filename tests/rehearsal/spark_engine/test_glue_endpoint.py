"""The local Glue endpoint through Glue's API (``lakeline.runtimes.deployed.local_aws.glue``): a run of the deployed
job runs its script from the asset with the job's arguments under the run's, as the job's role."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from botocore.exceptions import ClientError

from lakeline.runtimes.deployed.local_aws import iam
from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from lakeline.runtimes.deployed.local_aws.glue import LocalGlue
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
    assert run["ErrorMessage"].startswith("InvalidInputError: --mode must be one of ('stage_a', 'stage_b', ")
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


# -- Gaps of the local Glue, pinned: each test passes while the gap is there (see glue.py's docstring and
#    docs/development.md, "Gaps, said plainly"); one that fails means the gap closed and both should say so.

GAP_SCRIPT = """
import sys, time
from awsglue.context import GlueContext
from awsglue.utils import getResolvedOptions
from pyspark.context import SparkContext

args = getResolvedOptions(sys.argv, ["source", "pause"])
spark = GlueContext(SparkContext.getOrCreate()).spark_session
print("began", time.time())
time.sleep(float(args["pause"]))
print("rows", spark.read.option("header", "true").csv(args["source"]).count())
print("ended", time.time())
"""


@contextmanager
def gap_job(deployment: Deployment) -> Iterator[tuple[str, str, str]]:
    """A job of its own whose role may read its script and nothing else of its bucket, which also holds a
    CSV of two rows: (job name, the CSV's s3:// URI, the role's name). Removed after, job and role."""
    s3, iam, glue = deployment.client("s3"), deployment.client("iam"), deployment.client("glue")
    bucket = f"gap-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="scripts/gap.py", Body=GAP_SCRIPT.encode())
    s3.put_object(Bucket=bucket, Key="data/rows.csv", Body=b"x\n1\n2\n")
    role = f"gap-job-{uuid.uuid4().hex[:8]}"
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "glue.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    }
    arn = iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    script_only = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/scripts/*"},
            # The rehearsal asks kms:Decrypt of every GetObject (Lakeline's buckets all use the data key).
            {"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*"},
        ],
    }
    iam.put_role_policy(RoleName=role, PolicyName="script", PolicyDocument=json.dumps(script_only))
    name = f"gap-{role}"
    glue.create_job(
        Name=name,
        Role=arn,
        Command={"Name": "glueetl", "ScriptLocation": f"s3://{bucket}/scripts/gap.py", "PythonVersion": "3"},
        GlueVersion="5.0",
        ExecutionProperty={"MaxConcurrentRuns": 2},
    )
    try:
        yield name, f"s3://{bucket}/data/rows.csv", role
    finally:
        glue.delete_job(JobName=name)  # the other tests find the deployed job as the only one


def wait_for(deployment: Deployment, name: str, run_id: str) -> dict[str, Any]:
    glue = deployment.client("glue")
    while True:
        run: dict[str, Any] = glue.get_job_run(JobName=name, RunId=run_id)["JobRun"]
        if run["JobRunState"] not in ("STARTING", "RUNNING"):
            return run
        time.sleep(0.05)


def test_gap_spark_reads_s3_without_the_job_role_s_rights(deployment: Deployment, local_glue: LocalGlue) -> None:
    """In AWS, Glue's Spark reads S3 with the job role's credentials (EMRFS): a role that may read only its
    script fails on the data. Here Spark reads the mirror: the read succeeds, while the same role's SDK
    read of the object is refused (the policy does deny it)."""
    with gap_job(deployment) as (name, source, role):
        run_id = deployment.client("glue").start_job_run(JobName=name, Arguments={"--source": source, "--pause": "0"})[
            "JobRunId"
        ]
        run = wait_for(deployment, name, run_id)
        credentials = iam.role_credentials(deployment.account, deployment.region, role, "gap-check")
        bucket, key = source.removeprefix("s3://").split("/", 1)
        with pytest.raises(ClientError, match="AccessDenied"):
            deployment.client("s3", credentials=credentials).get_object(Bucket=bucket, Key=key)
    assert run["JobRunState"] == "SUCCEEDED", run.get("ErrorMessage")
    assert "rows 2" in local_glue.logs[run_id]


def test_gap_runs_one_at_a_time_and_cannot_be_stopped(deployment: Deployment, local_glue: LocalGlue) -> None:
    """Glue runs up to MaxConcurrentRuns at once and BatchStopJobRun stops a run (STOPPED); here a second
    run waits for the first to end, and BatchStopJobRun fails (moto has none), the run going on to the end."""
    glue = deployment.client("glue")
    with gap_job(deployment) as (name, source, _role):
        arguments = {"--source": source, "--pause": "1"}
        first = glue.start_job_run(JobName=name, Arguments=arguments)["JobRunId"]
        second = glue.start_job_run(JobName=name, Arguments=arguments)["JobRunId"]
        with pytest.raises(ClientError, match=r"\(500\)"):  # moto serves no BatchStopJobRun
            glue.batch_stop_job_run(JobName=name, JobRunIds=[first])
        runs = [wait_for(deployment, name, run_id) for run_id in (first, second)]
    assert [run["JobRunState"] for run in runs] == ["SUCCEEDED", "SUCCEEDED"]
    times = [
        {
            word: float(value)
            for word, value in (
                line.split() for line in local_glue.logs[run_id].splitlines() if line.startswith(("began", "ended"))
            )
        }
        for run_id in (first, second)
    ]
    assert times[1]["began"] >= times[0]["ended"]
