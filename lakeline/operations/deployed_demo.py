"""``lakeline demo``: the pipeline users deploy, run whole on one machine with no AWS account, on a sample
lake (CSV customers and Parquet orders, four daily partitions) and ``examples/demo``'s dependency items
and analytics tables; the last file is uploaded twice, as S3 and SQS may deliver it twice. How the
deployment is stood up and operated: ``lakeline.operations.deployed_run``."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from lakeline.local.demo import DEMO_DAYS, DEMO_LAST_DAY, demo_config
from lakeline.local.sample import SampleFile, daily_partitions, write_customers_csv, write_orders_parquet
from lakeline.operations.deployed_run import DeployedProject, DeployedRun


def run_demo(workspace_dir: Path, console: Console) -> DeployedRun:
    started = time.monotonic()
    config = demo_config(workspace_dir)
    console.print(f"[bold]Lakeline demo[/] in {config.workspace}: the deployed system, on this machine")
    with DeployedProject(config, console) as project:
        with console.status("writing the sample lake"):
            arrivals: list[SampleFile] = []
            for day in daily_partitions(DEMO_LAST_DAY, DEMO_DAYS):
                arrivals.append(write_customers_csv(project.workspace.raw_dir, day, rows=500))
                arrivals.append(
                    write_orders_parquet(project.engine.session, project.workspace.raw_dir, day, rows=5_000)
                )
        keys = [arrival.key for arrival in arrivals]
        project.prepare()
        # The last arrival is delivered twice: the second delivery must change nothing.
        project.process([*keys, keys[-1]])
        return project.finish(started)
