"""``lakeline demo``: the pipeline users deploy, run whole on one machine with no AWS account, on a sample
lake (CSV customers and Parquet orders, four daily partitions) and ``examples/demo``'s dependency items
and analytics tables; the last file is uploaded twice, as S3 and SQS may deliver it twice. Each demo
starts afresh (nothing is kept from an earlier one). How the
deployment is stood up and operated: ``lakeline.runtimes.deployed.run``."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from lakeline.runtimes.deployed.local_aws import timings
from lakeline.runtimes.deployed.run import DeployedProject, DeployedRun
from lakeline.runtimes.embedded.demo import demo_config, write_demo_sample


def run_deployed_demo(workspace_dir: Path, console: Console) -> DeployedRun:
    started = time.monotonic()
    config = demo_config(workspace_dir)
    console.print(f"[bold]Lakeline demo[/] in {config.workspace}: the deployed system, on this machine")
    with DeployedProject(config, console, keep_state=False) as project:
        with console.status("writing the sample lake"), timings.phase("sample lake"):
            keys = write_demo_sample(project.engine.session, project.workspace.raw_dir)
        project.prepare()
        # The last arrival is delivered twice: the second delivery must change nothing.
        project.process([*keys, keys[-1]])
        return project.finish(started)
