"""The operator of a local deployment: what a team does with it through the endpoint's APIs (Athena statements
through pyathena, DDL, items, uploads, invocations, the dead-letter queues), as it would with a deployment in AWS;
and what operating it can raise."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import sqlglot

from lakeline.dependencies.model import DependencyItem
from lakeline.dependencies.store import DependencyStore
from lakeline.engines.athena import pyathena_statement
from lakeline.engines.base import QueryFailed, QueryResult
from lakeline.errors import LakelineError
from lakeline.operations.dead_letters import read_dead_letters
from lakeline.operations.status import LATER_OUTPUTS, STACK_OUTPUTS
from lakeline.runtimes.deployed.local_aws.deploy import Deployment
from stage_b.artifacts import ARTIFACTS_PREFIX


def operation_errors() -> tuple[type[Exception], ...]:
    """What operating the local deployment can raise besides Lakeline's errors: a refused or failed AWS
    call (the endpoint's, IAM enforced), said in one line by the command instead of a traceback."""
    from botocore.exceptions import BotoCoreError, ClientError

    return (LakelineError, BotoCoreError, ClientError)


class OperationFailed(LakelineError):
    """A step of operating the deployment could not be done (a statement, a function call): the run stops."""


class Operator:
    """What a team does with its deployment, through the endpoint's APIs as the operator."""

    def __init__(self, deployment: Deployment, environment: str) -> None:
        self.deployment = deployment
        self.pipeline_stack = f"Lakeline-{environment}-Pipeline"
        self.outputs = deployment.outputs[self.pipeline_stack]
        self.workgroup = f"lakeline-{environment}"
        self._connection: Any = None  # pyathena's, made on the first statement (``athena_result``)
        self._connection_lock = threading.Lock()
        self.lineage_database = f"lakeline_lineage_{environment}"  # stacks/storage_stack.py
        names = [entry["Name"] for entry in deployment.client("s3").list_buckets()["Buckets"]]
        self.buckets = {
            kind: next(name for name in names if f"{kind}bucket" in name.lower() and "accesslogs" not in name.lower())
            for kind in ("raw", "stage", "analytics", "artifacts", "lineagearchive")
        }

    @property
    def named_outputs(self) -> dict[str, str]:
        """The pipeline stack's outputs by their ``status.STACK_OUTPUTS`` names, as ``status.stack_outputs``
        reads them from a stack in AWS."""
        names = {**STACK_OUTPUTS, **LATER_OUTPUTS}
        return {name: self.outputs[key] for name, key in names.items() if key in self.outputs}

    def athena(self, sql: str) -> list[tuple[Any, ...]]:
        """A statement through Athena with pyathena, as users query; its rows, with their types."""
        return self.athena_result(sql).rows

    def athena_result(self, sql: str) -> QueryResult:
        """A statement through Athena with pyathena: its columns and rows (none for DDL)."""
        import pyathena

        if self.deployment.credentials is None:
            raise OperationFailed("the deployment has no operator credentials (IAM is not enforced)")
        with self._connection_lock:
            if self._connection is None:
                # One connection for the operator's statements: each new one builds a boto3 session and
                # loads Athena's service model again (a tenth of a CPU second per statement).
                options: dict[str, Any] = {
                    "work_group": self.workgroup,
                    "region_name": self.deployment.region,
                    "endpoint_url": self.deployment.endpoint,
                    "poll_interval": 0.05,
                    **self.deployment.credentials.client_arguments(),
                }
                self._connection = pyathena.connect(**options)
            connection = self._connection
        try:
            return pyathena_statement(connection, sql)
        except QueryFailed as error:
            raise OperationFailed(f"{error}\n{sql.strip()}") from error

    def run_ddl(self, text: str, what: str) -> int:
        """Athena DDL, ``$raw_root``, ``$stage_root`` and ``$analytics_root`` standing for the buckets."""
        for name, kind in (("$raw_root", "raw"), ("$stage_root", "stage"), ("$analytics_root", "analytics")):
            text = text.replace(name, f"s3://{self.buckets[kind]}")
        try:
            parsed = sqlglot.parse(text, read="athena")
        except sqlglot.errors.ParseError as error:
            raise OperationFailed(f"cannot parse the DDL {what}: {str(error).splitlines()[0]}") from error
        statements = [statement for statement in parsed if statement is not None]
        for statement in statements:
            self.athena(statement.sql("athena"))
        return len(statements)

    def table_exists(self, database: str, table: str) -> bool:
        glue = self.deployment.client("glue")
        try:
            glue.get_table(DatabaseName=database, Name=table)
        except glue.exceptions.EntityNotFoundException:
            return False
        return True

    def upload_queries(self, folder: Path) -> int:
        """The step SQL files, where stage B reads them (``aws s3 sync`` of the queries folder)."""
        files = sorted(path for path in folder.rglob("*.sql") if path.is_file()) if folder.is_dir() else []
        for path in files:
            key = f"{ARTIFACTS_PREFIX}/{path.relative_to(folder).as_posix()}"
            self.deployment.client("s3").upload_file(str(path), self.buckets["artifacts"], key)
        return len(files)

    def put_items(self, items: list[DependencyItem]) -> None:
        tables = self.outputs["DependenciesTable"], self.outputs["DependenciesByTableTable"]
        DependencyStore(self.deployment.client("dynamodb"), *tables).put_items(items)

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

    def function(self, fragment: str) -> tuple[str, int]:
        """The name and timeout of the one deployed function whose name contains ``fragment``."""
        client = self.deployment.client("lambda")
        found = [entry for entry in client.list_functions()["Functions"] if fragment in entry["FunctionName"]]
        ((name, timeout),) = [(entry["FunctionName"], entry.get("Timeout", 3)) for entry in found]
        return name, timeout

    def invoke(self, function: str) -> Any:
        """Invoke the deployed function whose name contains ``function`` (as ``aws lambda invoke``)."""
        name, timeout = self.function(function)
        # Answered when the function returns: wait as long as it may run (botocore's 60 s would give up on
        # the nightly schedule of a large lineage table, while the function goes on).
        waiting = self.deployment.client("lambda", read_timeout=timeout + 60)
        response = waiting.invoke(FunctionName=name, Payload=b"{}")
        payload = json.loads(response["Payload"].read() or b"null")
        if "FunctionError" in response:
            raise OperationFailed(f"{name} failed: {payload}")
        return payload
