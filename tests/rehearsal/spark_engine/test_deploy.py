"""The Spark engine's deployment stands up: its Glue job, as CloudFormation made it from the template."""

from __future__ import annotations

from lakeline.runtimes.deployed.local_aws.deploy import Deployment


def test_the_spark_job_is_deployed_with_its_script_and_library_assets(deployment: Deployment) -> None:
    glue = deployment.client("glue")
    (name,) = glue.list_jobs()["JobNames"]
    job = glue.get_job(JobName=name)["Job"]
    assert job["Command"]["ScriptLocation"].startswith("s3://cdk-")
    assert job["DefaultArguments"]["--extra-py-files"].endswith(".zip")
