"""``lakeline demo``: the pipeline users deploy, run whole on one machine with no AWS account, on a sample
lake (CSV customers and Parquet orders, four daily partitions) and ``examples/demo``'s dependency items
and analytics tables; the last file is uploaded twice, as S3 and SQS may deliver it twice. Then one more
customers file, which the table's checks refuse: its execution is blocked at the quality step and the file
parked, which the demo verifies and prints (it fails if the file was not blocked). Each demo starts afresh
(nothing is kept from an earlier one). How the deployment is stood up and operated:
``lakeline.runtimes.deployed.run``."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from lakeline.errors import LakelineError
from lakeline.runtimes.deployed.local_aws import timings
from lakeline.runtimes.deployed.run import DeployedProject, DeployedRun
from lakeline.runtimes.embedded.demo import (
    BLOCKED_DAY,
    CUSTOMERS,
    ExpectedBlock,
    demo_config,
    expected_block,
    print_block,
    still_served,
    write_blocked_file,
    write_demo_sample,
)


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
        # Then a file the customers table's checks refuse: its execution is blocked, the file parked.
        project.process([write_blocked_file(project.workspace.raw_dir)])
        run = project.finish(started)
    return judged(run, console)


def judged(run: DeployedRun, console: Console) -> DeployedRun:
    """``run`` less the demo's blocked file (its parked message and its failed execution), which must be there
    and is printed; summary.json keeps them. ``LakelineError`` if the file was not blocked."""
    queue = "StageA"  # queue A's DLQ, where the stage A failure function parks an arrival
    reason, others = expected_block(run.parked.get(queue, []))
    blocked = f"quality checks blocked {CUSTOMERS} (date={BLOCKED_DAY})"
    executions = [record for record in run.failed if blocked in (record.cause or "")]
    if len(executions) != 1:
        raise LakelineError(f"{len(executions)} executions were blocked at {CUSTOMERS} date={BLOCKED_DAY}, not one")
    still_served(run.tables)
    print_block(
        console, ExpectedBlock(reason, f"parked in {queue}'s dead-letter queue (as `lakeline dlq list` lists it)")
    )
    parked = {name: (others if name == queue else reasons) for name, reasons in run.parked.items()}
    return replace(
        run,
        stage_a=[record for record in run.stage_a if record is not executions[0]],
        parked={name: reasons for name, reasons in parked.items() if reasons},
    )
