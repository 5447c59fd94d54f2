"""The AWS Glue for Spark job behind ``-c engine=spark``: runs a stage's statements with Lakeline's own
Spark engine against the Glue Data Catalog, with the same guarantees as on Athena.

Arguments (Glue job parameters): ``--mode stage_a|stage_b|quality_a|quality_b --plan <plan JSON>``: a stage's
writes, or the quality checks of what they wrote (#41, ``stage_end.quality.run_quality``: the run fails with
``QualityBlocked`` when a ``block`` rule failed).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lakeline.engines.spark import SparkEngine
from lakeline.errors import InvalidInputError
from lakeline.storage import ObjectStore, is_data_file
from stage_a.plan import StageAPlan
from stage_a.run import execute_stage_a
from stage_b.plan import StageBPlan
from stage_b.run import execute_stage_b
from stage_end.quality import run_quality

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MODES = ("stage_a", "stage_b", "quality_a", "quality_b")


class HadoopFiles:
    """The files as the job's Spark reads them, through Hadoop's file system (S3 on Glue): the quality step writes
    the manifest its symlink table reads with them, so Spark finds it wherever Spark's S3 is."""

    def __init__(self, session: SparkSession) -> None:
        self.session = session

    def _path(self, location: str) -> tuple[Any, Any]:
        context: Any = self.session.sparkContext
        path = context._jvm.org.apache.hadoop.fs.Path(location)
        return path, path.getFileSystem(context._jsc.hadoopConfiguration())

    def list_data_files(self, location: str) -> list[str]:
        """Every data file below ``location``, recursively, sorted (as ``ObjectStore.list_data_files``)."""
        path, filesystem = self._path(location)
        if not filesystem.exists(path):
            return []
        found, listing = [], filesystem.listFiles(path, True)
        while listing.hasNext():
            status = listing.next()
            if is_data_file(status.getPath().getName()):
                found.append(str(status.getPath().toString()))
        return sorted(found)

    def write_text(self, location: str, text: str) -> None:
        path, filesystem = self._path(location)
        output = filesystem.create(path, True)
        try:
            output.write(bytearray(text.encode()))
        finally:
            output.close()


def run_job(arguments: dict[str, str], session: SparkSession, store: ObjectStore) -> dict[str, Any]:
    mode = arguments.get("mode", "")
    if mode not in MODES:
        raise InvalidInputError(f"--mode must be one of {MODES}, got {mode!r}")
    try:
        document = json.loads(arguments["plan"])
    except (KeyError, json.JSONDecodeError) as error:
        raise InvalidInputError(f"--plan must be the {mode} plan as JSON: {error}") from error
    engine = SparkEngine(session)
    # The plan only writes here: the state machine commits it and then points the catalog at it
    # (``lambdas/partition_commit``, the publish task), under the lease its router took. A plan without a
    # lease is not the pipeline's: nothing would commit it, so it is refused before anything runs.
    if mode.startswith("quality_"):
        plan = StageAPlan.from_dict(document) if mode == "quality_a" else StageBPlan.from_dict(document)
        _leased(plan.lease, plan.run_token)
        if plan.quality is None:
            raise InvalidInputError(f"the plan of run {plan.run_token} has no checks")
        report = run_quality(
            plan.quality,
            target_location=plan.target_location,
            engine=engine,
            store=HadoopFiles(session),
            carry_from=plan.carry_from,
            replaces=plan.replaces if isinstance(plan, StageBPlan) else (),
        )
        return {"table": report.table, "checks": len(report.results), "warned": [r.rule for r in report.failed]}
    if mode == "stage_a":
        plan_a = StageAPlan.from_dict(document)
        _leased(plan_a.lease, plan_a.run_token)
        execute_stage_a(plan_a, engine, store)
        return {"table": f"{plan_a.target_database}.{plan_a.table}", "written": plan_a.target_location}
    plan_b = StageBPlan.from_dict(document)
    _leased(plan_b.lease, plan_b.run_token)
    execute_stage_b(plan_b, engine, store)
    return {"table": plan_b.dataset, "written": plan_b.target_location}


def _leased(lease: dict[str, Any] | None, run_token: str) -> None:
    if lease is None:
        raise InvalidInputError(
            f"the plan of run {run_token} holds no lease: only the pipeline's leased plans run here"
        )


def main(argv: Sequence[str]) -> None:  # pragma: no cover - runs only inside AWS Glue
    from awsglue.context import GlueContext
    from awsglue.utils import getResolvedOptions
    from pyspark.context import SparkContext

    from lakeline.aws.clients import AwsClients
    from lakeline.catalog_locations import GlueLocations
    from lakeline.storage import S3ObjectStore

    arguments = getResolvedOptions(list(argv), ["mode", "plan"])
    session = GlueContext(SparkContext.getOrCreate()).spark_session
    aws = AwsClients()
    print(json.dumps(run_job(arguments, session, S3ObjectStore(aws.s3, GlueLocations(aws.glue)))))


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv)
