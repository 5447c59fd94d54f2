"""``lakeline demo``: the whole pipeline on one machine, with no AWS account.

1. starts embedded Spark and a local AWS endpoint (moto's server on 127.0.0.1);
2. writes a sample lake (CSV customers and Parquet orders, four daily partitions) and creates the
   analytics tables stage B writes (``examples/demo/tables.sql``);
3. registers the dependency items of ``examples/demo/dependencies.json`` (the seed's example among
   them); the dependencies stream function builds dependencies-by-table;
4. drops the sample files as arrivals (one of them twice, as S3 and SQS may) and runs the event flow:
   stage A, routing, stage B chains, lineage through the lineage queue into the lineage table;
5. traces the lineage into the archive and queries it with the seed's UNNEST query on Spark;
6. prints a summary, writes ``summary.json`` and ``lineage.html``.
"""

from __future__ import annotations

import time
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from lakeline.project.config import ProjectConfig
from lakeline.repository import in_repository
from lakeline.runtimes.embedded.project import LocalProject, ProjectRun
from lakeline.runtimes.embedded.sample import SampleFile, daily_partitions, write_customers_csv, write_orders_parquet
from lakeline.settings import TableSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEMO_DAYS = 4
DEMO_LAST_DAY = date(2022, 1, 20)


def demo_config(workspace: Path) -> ProjectConfig:
    examples = in_repository("examples", "demo", needed_by="the demo")
    return ProjectConfig(
        workspace=workspace.resolve(),
        environment="dev",
        dependencies=[examples / "dependencies.json"],
        tables=[examples / "tables.sql"],
        # Orders are larger: two files per partition, bucketed by the order id.
        tables_settings={"engineering_sales_dev.orders": TableSettings(bucketed_by=("order_id",), bucket_count=2)},
    )


def write_demo_sample(session: SparkSession, raw_dir: Path) -> list[str]:
    """The sample lake's files under ``raw_dir`` (kept if there: the sample is deterministic); their keys."""
    arrivals: list[SampleFile] = []
    for day in daily_partitions(DEMO_LAST_DAY, DEMO_DAYS):
        arrivals.append(write_customers_csv(raw_dir, day, rows=500))
        arrivals.append(write_orders_parquet(session, raw_dir, day, rows=5_000))
    return [arrival.key for arrival in arrivals]


def run_demo(workspace_dir: Path, console: Console) -> ProjectRun:
    started = time.monotonic()
    config = demo_config(workspace_dir)
    console.print(f"[bold]Lakeline demo[/] in {config.workspace}")
    with LocalProject(config, console) as project:
        with console.status("writing the sample lake and the analytics tables"):
            keys = write_demo_sample(project.started_flow.engine.session, project.workspace.raw_dir)
        project.prepare()
        # The last arrival is delivered twice: the second delivery must change nothing.
        project.process([*keys, keys[-1]])
        return project.finish(started)
