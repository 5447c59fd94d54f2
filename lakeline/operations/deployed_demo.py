"""``lakeline demo``: the pipeline users deploy, run whole on one machine with no AWS account.

1. ``cdk synth`` of the app (``-c trace_settle_seconds=0``: the demo traces at once), and the cloud assembly
   deployed on a local AWS endpoint (moto's server) with IAM enforced, its functions run from their bundled
   assets, its state machines by an ASL interpreter, its Athena on embedded Spark
   (``lakeline.local.rehearsal.system``);
2. as a team does with a deployment: the raw, stage and analytics tables created with Athena DDL
   (``examples/demo/sources.sql``, ``examples/demo/tables.sql``), the dependency items of
   ``examples/demo/dependencies.json`` put into the dependencies table;
3. the sample files (CSV customers and Parquet orders, four daily partitions) uploaded into the raw
   bucket, the last one twice: S3's events go through the EventBridge rule, queue A and the routers to the
   state machines, which route on to stage B;
4. the nightly lineage schedule invoked; the archived lineage queried with Athena (the seed's UNNEST query);
5. a summary printed (executions, parked messages, tables), ``summary.json`` and ``lineage.html`` written.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import sqlglot
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lakeline.console import print_whole
from lakeline.dependencies.files import load_items
from lakeline.dependencies.store import DependencyStore
from lakeline.errors import LakelineError
from lakeline.lineage.records.archive_table import DEFAULT_TABLE
from lakeline.lineage.records.query import bind_archive_table, load_query
from lakeline.lineage.viewer.html import write_lineage_html
from lakeline.local.rehearsal.deploy import Deployment
from lakeline.local.rehearsal.executions import ExecutionRecord
from lakeline.local.rehearsal.system import DeployedSystem, stood_up, synthesize
from lakeline.local.relocation import open_engine
from lakeline.local.sample import SampleFile, daily_partitions, write_customers_csv, write_orders_parquet
from lakeline.local.workspace import Workspace
from lakeline.names import ddl_name
from lakeline.operations.dead_letters import read_dead_letters

DEMO_DAYS = 4
DEMO_LAST_DAY = date(2022, 1, 20)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "demo"
PIPELINE = "Lakeline-dev-Pipeline"
DATABASE_PREFIX = "deployed__"  # the local Athena's Spark databases, apart from `lakeline run`'s own
ARCHIVE_PREFIX = "archive/"  # the traced trees in the lineage archive bucket (stacks/storage_stack.py)
LINEAGE_DATABASE = "lakeline_lineage_dev"  # the archive's Glue database (stacks/storage_stack.py)
WORKGROUP = "lakeline-dev"
CONTEXT = {
    "environment": "dev",
    "engine": "athena",
    "trace_settle_seconds": "0",
    # Orders are larger: two files per partition, bucketed by the order id.
    "table_settings": {"engineering_sales_dev.orders": {"bucketed_by": ["order_id"], "bucket_count": 2}},
}


class DemoFailed(LakelineError):
    """A step of the demo could not be done (a statement, a function call): the demo stops there."""


@dataclass
class DemoRun:
    workspace: Path
    stage_a: list[ExecutionRecord] = field(default_factory=list)
    stage_b: list[ExecutionRecord] = field(default_factory=list)
    parked: dict[str, list[str]] = field(default_factory=dict)
    """Each dead-letter queue with messages → their reasons."""
    tables: list[dict[str, Any]] = field(default_factory=list)
    contents: dict[str, list[list[Any]]] = field(default_factory=dict)
    """Each dependency item's table, all of its rows (read with Athena)."""
    lineage_records: int = 0
    archive_objects: int = 0
    archived_lineage_rows: int = 0
    events: int = 0
    html: Path | None = None
    seconds: float = 0.0

    @property
    def nothing_new(self) -> list[ExecutionRecord]:
        """Stage A executions that wrote nothing: a repeated delivery of an arrival already loaded."""
        return [record for record in self.stage_a if not any(":athena:" in task.resource for task in record.tasks)]

    @property
    def failed(self) -> list[ExecutionRecord]:
        return [record for record in (*self.stage_a, *self.stage_b) if record.status != "SUCCEEDED"]

    @property
    def clean(self) -> bool:
        return not self.failed and not any(self.parked.values())


class Operator:
    """What a team does with its deployment, through the endpoint's APIs as the operator."""

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self.outputs = deployment.outputs[PIPELINE]
        names = [entry["Name"] for entry in deployment.client("s3").list_buckets()["Buckets"]]
        self.buckets = {
            kind: next(name for name in names if f"{kind}bucket" in name.lower() and "accesslogs" not in name.lower())
            for kind in ("raw", "stage", "analytics", "lineagearchive", "athenaresults")
        }

    def athena(self, sql: str) -> list[tuple[Any, ...]]:
        """A statement through Athena with pyathena, as users query; its rows, with their types."""
        import pyathena
        from pyathena.error import DatabaseError

        if self.deployment.credentials is None:
            raise DemoFailed("the deployment has no operator credentials (IAM is not enforced)")
        options: dict[str, Any] = {
            "work_group": WORKGROUP,
            "region_name": self.deployment.region,
            "endpoint_url": self.deployment.endpoint,
            "poll_interval": 0.05,
            **self.deployment.credentials.client_arguments(),
        }
        connection = pyathena.connect(**options)
        try:
            cursor = connection.cursor()
            cursor.execute(sql)
            return list(cursor.fetchall()) if cursor.description else []
        except DatabaseError as error:
            raise DemoFailed(f"Athena statement failed: {error}\n{sql.strip()}") from error
        finally:
            connection.close()

    def run_ddl(self, path: Path) -> int:
        text = path.read_text()
        for name, kind in (("$raw_root", "raw"), ("$stage_root", "stage"), ("$analytics_root", "analytics")):
            text = text.replace(name, f"s3://{self.buckets[kind]}")
        statements = [statement for statement in sqlglot.parse(text, read="athena") if statement is not None]
        for statement in statements:
            self.athena(statement.sql("athena"))
        return len(statements)

    def put_items(self, paths: list[Path]) -> int:
        items = load_items(paths)
        tables = self.outputs["DependenciesTable"], self.outputs["DependenciesByTableTable"]
        store = DependencyStore(self.deployment.client("dynamodb"), *tables)
        store.put_items(items)
        return len(items)

    def upload(self, raw_dir: Path, key: str) -> None:
        self.deployment.client("s3").upload_file(str(raw_dir / key), self.buckets["raw"], key)

    def parked(self) -> dict[str, list[str]]:
        """Every dead-letter queue with messages (left in them) → the reason each was parked, as
        ``lakeline dlq list`` reads them."""
        sqs = self.deployment.client("sqs")
        found: dict[str, list[str]] = {}
        for name, url in self.outputs.items():
            if name.endswith("DeadLetterQueueUrl"):
                letters = read_dead_letters(sqs, url)
                if letters:
                    found[name.removesuffix("DeadLetterQueueUrl")] = [letter.reason for letter in letters]
        return found

    def invoke(self, function: str) -> Any:
        """Invoke the deployed function whose name contains ``function`` (as ``aws lambda invoke``)."""
        client = self.deployment.client("lambda")
        names = [entry["FunctionName"] for entry in client.list_functions()["Functions"]]
        (name,) = [candidate for candidate in names if function in candidate]
        response = client.invoke(FunctionName=name, Payload=b"{}")
        payload = json.loads(response["Payload"].read() or b"null")
        if "FunctionError" in response:
            raise DemoFailed(f"{name} failed: {payload}")
        return payload


def run_demo(workspace_dir: Path, console: Console) -> DemoRun:
    started = time.monotonic()
    workspace = Workspace.at(workspace_dir)
    run = DemoRun(workspace.root)
    console.print(f"[bold]Lakeline demo[/] in {workspace.root}: the deployed system, on this machine")
    with console.status("cdk synth: the CDK app as users deploy it"):
        assembly = workspace.root / "cdk.out"
        shutil.rmtree(assembly, ignore_errors=True)
        synthesize(assembly, CONTEXT)
    with console.status("starting embedded Spark"):
        engine = open_engine(workspace, lambda moved: console.print(escape(moved), soft_wrap=True))
        # Each run deploys anew: what an earlier run's deployment had (its S3 mirror, its tables) goes.
        shutil.rmtree(workspace.root / "deployed", ignore_errors=True)
        for database in engine.session.catalog.listDatabases():
            if database.name.startswith(DATABASE_PREFIX):
                engine.execute(f"DROP DATABASE IF EXISTS {ddl_name(database.name)} CASCADE")
    with ExitStack() as stack:
        with console.status("deploying the cloud assembly on a local AWS endpoint (moto), IAM enforced"):
            system = stack.enter_context(
                stood_up(assembly, engine, workspace.root / "deployed", database_prefix=DATABASE_PREFIX)
            )
        _drive(system, workspace, engine.session, console, run)
    run.seconds = time.monotonic() - started
    _write_summary(run)
    _print_summary(run, console)
    return run


def _drive(system: DeployedSystem, workspace: Workspace, session: Any, console: Console, run: DemoRun) -> None:
    operator = Operator(system.deployment)
    with console.status("writing the sample lake"):
        arrivals: list[SampleFile] = []
        for day in daily_partitions(DEMO_LAST_DAY, DEMO_DAYS):
            arrivals.append(write_customers_csv(workspace.raw_dir, day, rows=500))
            arrivals.append(write_orders_parquet(session, workspace.raw_dir, day, rows=5_000))
    with console.status("creating the tables with Athena DDL"):
        count = operator.run_ddl(EXAMPLES / "sources.sql") + operator.run_ddl(EXAMPLES / "tables.sql")
    console.print(f"ran {count} Athena DDL statements (examples/demo/sources.sql, tables.sql)")
    items = operator.put_items([EXAMPLES / "dependencies.json"])
    console.print(f"put {items} dependency items into {operator.outputs['DependenciesTable']}")
    keys = [arrival.key for arrival in arrivals]
    with _reporting(system, console):
        for key in [*keys, keys[-1]]:  # the last arrival is delivered twice: the second must change nothing
            operator.upload(workspace.raw_dir, key)
            console.print(f"[dim]{datetime.now():%H:%M:%S}[/] uploaded s3://{operator.buckets['raw']}/{key}")
        system.executions.wait(timeout=600)
    records = list(system.executions.records.values())
    machine_a, machine_b = operator.outputs["StageAStateMachineArn"], operator.outputs["StageBStateMachineArn"]
    run.stage_a = [record for record in records if _machine(record.arn) == machine_a]
    run.stage_b = [record for record in records if _machine(record.arn) == machine_b]
    with console.status("nightly lineage trace: lineage table → archive"):
        operator.invoke("LineageSchedule")
        system.executions.wait(timeout=600)
    run.parked = operator.parked()
    _lineage(operator, system, workspace, run)
    run.tables = _tables(operator)
    for item in load_items([EXAMPLES / "dependencies.json"]):
        rows = operator.athena(f"SELECT * FROM {item.dataset} ORDER BY 1, 2")
        run.contents[item.dataset] = [list(row) for row in rows]


@contextmanager
def _reporting(system: DeployedSystem, console: Console) -> Iterator[None]:
    """One line per execution as it ends, while the uploads' work runs."""
    done = threading.Event()
    reported: set[str] = set()

    def report() -> None:
        while True:
            finished = done.is_set()
            for record in list(system.executions.records.values()):
                if record.status != "RUNNING" and record.arn not in reported:
                    reported.add(record.arn)
                    colour = "green" if record.status == "SUCCEEDED" else "red"
                    what = f"[{colour}]{record.status.lower()}[/] {escape(record.arn.rsplit(':', 2)[-2])} "
                    what += escape(record.arn.rsplit(":", 1)[-1])
                    if record.error:
                        what += f": {escape(record.error)} {escape((record.cause or '')[:300])}"
                    console.print(f"[dim]{datetime.now():%H:%M:%S}[/] {what}", highlight=False, soft_wrap=True)
            if finished:
                return
            time.sleep(0.2)

    reporter = threading.Thread(target=report, name="demo-report", daemon=True)
    reporter.start()
    try:
        with console.status("the deployment at work: stage A, routing, stage B, lineage"):
            yield
    finally:
        done.set()
        reporter.join()


def _machine(execution_arn: str) -> str:
    """The state machine ARN of an execution ARN."""
    prefix, machine, _name = execution_arn.rsplit(":", 2)
    return f"{prefix.replace(':execution', ':stateMachine')}:{machine}"


def _lineage(operator: Operator, system: DeployedSystem, workspace: Workspace, run: DemoRun) -> None:
    """The lineage table's records; the archive bucket copied into the workspace (its traced trees into
    ``lineage-archive/``, its OpenLineage events into ``lineage/openlineage.jsonl``), as ``aws s3 sync``
    would; the archive queried with Athena; the lineage picture."""
    deployment = system.deployment
    table = deployment.client("dynamodb").scan(TableName=_lineage_table(operator), Select="COUNT")
    run.lineage_records = int(table["Count"])
    s3 = deployment.client("s3")
    archive = operator.buckets["lineagearchive"]
    copies = workspace.root / "lineage-archive"
    shutil.rmtree(copies, ignore_errors=True)
    events: list[dict[str, Any]] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=archive):
        for entry in page.get("Contents", []):
            body = s3.get_object(Bucket=archive, Key=entry["Key"])["Body"].read()
            if entry["Key"].startswith("openlineage/"):
                events.append(json.loads(body))
            elif entry["Key"].startswith(ARCHIVE_PREFIX):
                copy = copies / entry["Key"].removeprefix(ARCHIVE_PREFIX)
                copy.parent.mkdir(parents=True, exist_ok=True)
                copy.write_bytes(body)
                run.archive_objects += 1
    events.sort(key=lambda event: (event["eventTime"], event["eventType"] != "START"))
    run.events = len(events)
    stored = workspace.root / "lineage" / "openlineage.jsonl"
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_text("".join(json.dumps(event, sort_keys=True) + "\n" for event in events))
    query = bind_archive_table(load_query(), LINEAGE_DATABASE, DEFAULT_TABLE)
    run.archived_lineage_rows = len(operator.athena(query))
    run.html = write_lineage_html(events, workspace.root / "lineage.html")


def _lineage_table(operator: Operator) -> str:
    names = operator.deployment.client("dynamodb").list_tables()["TableNames"]
    (name,) = [name for name in names if "lineage" in name.lower()]
    return str(name)


def _tables(operator: Operator) -> list[dict[str, Any]]:
    """Rows and data files of every partition Glue has of the demo's stage and analytics tables, counted
    through Athena and listed in S3."""
    glue = operator.deployment.client("glue")
    s3 = operator.deployment.client("s3")
    rows: list[dict[str, Any]] = []
    databases = sorted(entry["Name"] for entry in glue.get_databases()["DatabaseList"])
    for database in [name for name in databases if name.startswith("engineering_") and "_raw_" not in name]:
        for entry in sorted(glue.get_tables(DatabaseName=database)["TableList"], key=lambda table: table["Name"]):
            name, keys = f"{database}.{entry['Name']}", [key["Name"] for key in entry.get("PartitionKeys", [])]
            if not keys:
                continue
            columns = ", ".join(f'"{key}"' for key in keys)
            grouped = operator.athena(f"SELECT {columns}, count(*) FROM {name} GROUP BY {columns}")
            counts = {tuple(values): int(count) for *values, count in grouped}
            pages = glue.get_paginator("get_partitions").paginate(DatabaseName=database, TableName=entry["Name"])
            for partition in sorted((p for page in pages for p in page["Partitions"]), key=lambda p: p["Values"]):
                bucket, _, prefix = partition["StorageDescriptor"]["Location"].removeprefix("s3://").partition("/")
                listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix.rstrip("/") + "/").get("Contents", [])
                files = [item for item in listed if not item["Key"].rsplit("/", 1)[-1].startswith(("_", "."))]
                rows.append(
                    {
                        "table": name,
                        "partition": "/".join(f"{k}={v}" for k, v in zip(keys, partition["Values"], strict=True)),
                        "rows": counts.get(tuple(partition["Values"]), 0),
                        "files": len(files),
                    }
                )
    return rows


def _write_summary(run: DemoRun) -> Path:
    path = run.workspace / "summary.json"
    path.write_text(
        json.dumps(
            {
                "tables": run.tables,
                "contents": run.contents,
                "stage_a_runs": len(run.stage_a),
                "stage_a_runs_with_nothing_new": len(run.nothing_new),
                "stage_b_runs": len(run.stage_b),
                "failed_executions": [
                    {"execution": record.arn, "error": record.error, "cause": record.cause} for record in run.failed
                ],
                "parked": run.parked,
                "lineage_records": run.lineage_records,
                "archive_objects": run.archive_objects,
                "archived_lineage_rows": run.archived_lineage_rows,
                "openlineage_events": run.events,
                "seconds": round(run.seconds, 1),
            },
            indent=1,
            default=str,
        )
    )
    return path


def _print_summary(run: DemoRun, console: Console) -> None:
    summary = Table(title="tables")
    for column in ("table", "partition", "rows", "files"):
        summary.add_column(column, justify="right" if column in ("rows", "files") else "left")
    for row in run.tables:
        summary.add_row(row["table"], row["partition"], str(row["rows"]), str(row["files"]))
    print_whole(console, summary)
    console.print(
        f"stage A executions: {len(run.stage_a)} ({len(run.nothing_new)} with nothing new), "
        f"stage B executions: {len(run.stage_b)}, "
        f"failed: {len(run.failed)}, parked: {sum(len(reasons) for reasons in run.parked.values())}, "
        f"lineage records: {run.lineage_records}, archive objects: {run.archive_objects}, "
        f"archived lineage rows: {run.archived_lineage_rows}, OpenLineage events: {run.events}"
    )
    for record in run.failed:
        console.print(f"[red]failed[/] {escape(record.arn)}: {escape(record.error or '')} {escape(record.cause or '')}")
    for queue, reasons in run.parked.items():
        for reason in reasons:
            console.print(f"[red]parked[/] in {queue}'s DLQ: {escape(reason)}", soft_wrap=True)
    console.print(f"lineage picture: {run.html}")
    console.print(f"done in {run.seconds:.0f}s")
