"""``lakeline demo``: the whole pipeline on one machine, with no AWS account.

1. starts embedded Spark and a local AWS endpoint (moto's server on 127.0.0.1);
2. writes a sample lake (CSV customers and Parquet orders, four daily partitions) and creates the
   analytics tables stage B writes (``examples/demo/tables.sql``);
3. registers the dependency items of ``examples/demo/dependencies.json`` (the seed's example among
   them); the dependencies stream function builds dependencies-by-table;
4. drops the sample files as arrivals (one of them twice, as S3 and SQS may) and runs the event flow:
   stage A, routing, stage B chains, lineage through the lineage queue into the lineage table;
5. drops one more customers file, with a country the table's checks do not allow: its run is blocked by the
   quality gate (#41), nothing of it published, the day's previous version still served;
6. traces the lineage into the archive and queries it with the seed's UNNEST query on Spark;
7. prints a summary, writes ``summary.json`` and ``lineage.html``, and what was blocked (``expected_block``:
   the demo fails if the file was not blocked).
"""

from __future__ import annotations

import csv
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from lakeline.errors import LakelineError
from lakeline.project.config import ProjectConfig
from lakeline.quality.checks import Check
from lakeline.repository import in_repository
from lakeline.runtimes.embedded.project import LocalProject, ProjectRun
from lakeline.runtimes.embedded.sample import (
    COUNTRIES,
    SampleFile,
    daily_partitions,
    write_customers_csv,
    write_orders_parquet,
)
from lakeline.settings import TableSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEMO_DAYS = 4
DEMO_LAST_DAY = date(2022, 1, 20)
CUSTOMERS_PER_DAY = 500
CUSTOMERS = "engineering_mysql_dev.customers"
COUNTRY_RULE = f'ColumnValues "country" in [{", ".join(f"{chr(34)}{country}{chr(34)}" for country in COUNTRIES)}]'
CUSTOMER_CHECKS = (
    Check(rule='IsComplete "customer_id"'),
    Check(rule='IsUnique "customer_id"'),
    Check(rule=COUNTRY_RULE),
)
"""The customers table's checks, all ``block``: every sample file passes them; ``BLOCKED_KEY`` breaks the last."""
BLOCKED_DAY = f"{DEMO_LAST_DAY:%Y%m%d}"
BLOCKED_KEY = f"engineering/mysql/customers/date={BLOCKED_DAY}/customers_{BLOCKED_DAY}_late.csv"


def demo_config(workspace: Path) -> ProjectConfig:
    examples = in_repository("examples", "demo", needed_by="the demo")
    return ProjectConfig(
        workspace=workspace.resolve(),
        environment="dev",
        dependencies=[examples / "dependencies.json"],
        tables=[examples / "tables.sql"],
        tables_settings={
            # Orders are larger: two files per partition, bucketed by the order id.
            "engineering_sales_dev.orders": TableSettings(bucketed_by=("order_id",), bucket_count=2),
            CUSTOMERS: TableSettings(checks=CUSTOMER_CHECKS),
        },
    )


def write_demo_sample(session: SparkSession, raw_dir: Path) -> list[str]:
    """The sample lake's files under ``raw_dir`` (kept if there: the sample is deterministic); their keys."""
    arrivals: list[SampleFile] = []
    for day in daily_partitions(DEMO_LAST_DAY, DEMO_DAYS):
        arrivals.append(write_customers_csv(raw_dir, day, rows=CUSTOMERS_PER_DAY))
        arrivals.append(write_orders_parquet(session, raw_dir, day, rows=5_000))
    return [arrival.key for arrival in arrivals]


def write_blocked_file(raw_dir: Path) -> str:
    """A late customers file for the last day, two new customers, one of them in a country the table's rule does
    not allow ("uk"): its run must be blocked. Its key."""
    path = raw_dir / BLOCKED_KEY
    path.parent.mkdir(parents=True, exist_ok=True)
    first = int(BLOCKED_DAY) % 10_000 * 100_000 + CUSTOMERS_PER_DAY  # after the day's sample ids
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["customer_id", "name", "country", "lifetime_value"])
        writer.writerow([first, f"customer {first}", "fr", 120.5])
        writer.writerow([first + 1, f"customer {first + 1}", "uk", 75.0])
    return BLOCKED_KEY


@dataclass(frozen=True)
class ExpectedBlock:
    """The demo's bad file blocked as it must be: the reason it was refused with, where it is now."""

    reason: str
    parked: str


def expected_block(reasons: Iterable[str]) -> tuple[str, list[str]]:
    """The reason the demo's bad file was refused with (its partition blocked by the country rule), and the other
    reasons (what the demo is judged by). ``LakelineError`` if it was not blocked: the quality gate did not hold."""
    reasons, blocked = list(reasons), f"quality checks blocked {CUSTOMERS} (date={BLOCKED_DAY}): rule '{COUNTRY_RULE}'"
    mine = [reason for reason in reasons if blocked in reason]
    if len(mine) != 1:
        raise LakelineError(
            f"the demo's bad file {BLOCKED_KEY} was not blocked by the rule {COUNTRY_RULE} "
            f"({len(mine)} reasons name it): the quality gate did not hold"
        )
    return mine[0], [r for r in reasons if r != mine[0]]


def still_served(tables: Sequence[Mapping[str, Any]]) -> int:
    """The rows of the blocked day's customers partition, which must be the previous version's (the sample file's
    alone); ``LakelineError`` if not."""
    rows = [t["rows"] for t in tables if (t["table"], t["partition"]) == (CUSTOMERS, f"date={BLOCKED_DAY}")]
    if rows != [CUSTOMERS_PER_DAY]:
        raise LakelineError(
            f"{CUSTOMERS} date={BLOCKED_DAY} holds {rows} rows, not the {CUSTOMERS_PER_DAY} of its version before "
            "the blocked file: something of it was published"
        )
    return CUSTOMERS_PER_DAY


def print_block(console: Console, block: ExpectedBlock) -> None:
    """What the demo's bad file met, as a user reads it."""
    console.print(f"[bold]blocked, as expected:[/] {escape(BLOCKED_KEY)}", soft_wrap=True)
    console.print(f"  {escape(block.reason)}", soft_wrap=True)
    console.print(f"  {escape(block.parked)}", soft_wrap=True)
    console.print(
        f"  {CUSTOMERS} date={BLOCKED_DAY} still serves its previous version ({CUSTOMERS_PER_DAY} rows); nothing "
        "was published and its targets were not rebuilt",
        soft_wrap=True,
    )


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
        # Then a file the customers table's checks refuse: its run is blocked.
        project.process([write_blocked_file(project.workspace.raw_dir)])
        run = project.finish(started)
    reason, others = expected_block(run.report.failures)
    still_served(run.tables)
    print_block(console, ExpectedBlock(reason, "recorded as failed in summary.json (`lakeline status` lists it)"))
    run.report.failures = others  # the command is judged by the rest; summary.json keeps it
    return run
