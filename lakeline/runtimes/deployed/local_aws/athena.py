"""A local Athena endpoint: the moto server's Athena API, with each query run on embedded Spark (#20).

moto's Athena records a query and answers SUCCEEDED without running it. ``install_local_athena`` makes
the moto server of this process run every ``StartQueryExecution`` on Lakeline's ``SparkEngine``
(Athena-dialect SQL translated for Spark), against the state of the moto deployment, as Athena runs
against the Glue Data Catalog and S3:

- Catalog: Glue (moto's) is the truth. Before a query, each table it names is made in Spark's metastore
  as Glue has it (columns, partition keys, location, format, partitions), under a Spark database named
  ``<database_prefix><glue database>``, so it cannot meet the tables other users of the same Spark
  session keep under the same names. Unqualified names take the ``QueryExecutionContext`` database,
  else ``default``, as Athena does. After the query, what it changed in Spark (CTAS, CREATE, DROP,
  ALTER TABLE ... PARTITION, SET LOCATION, INSERT's new partitions, CREATE / DROP DATABASE) is written
  back to Glue, so the deployed functions see it.
- Storage: Spark here cannot read ``s3://``. Each ``s3://bucket/key`` is a file under ``<mirror>/bucket/
  key``; statements get ``file://`` URIs instead. Before a query the objects of the buckets it touches
  are brought from moto's S3 into the mirror; after it, files it wrote are put into moto's S3 and
  objects whose files it removed are deleted (Spark's hidden files — ``_SUCCESS``, ``.crc``,
  ``_temporary`` — stay local).
- API: ``StartQueryExecution`` answers at once (QUEUED); one worker thread runs the queries in order
  (RUNNING, then SUCCEEDED / FAILED with the engine's one-line reason as ``StateChangeReason`` and in
  ``AthenaError``), as Athena does, so no HTTP request waits on Spark and a queued query can be stopped.
  Results are written as Athena writes them (``<output>/<id>.csv`` for queries, ``.txt`` for DDL) and
  served by ``GetQueryResults`` (header row first for a SELECT, ``MaxResults`` / ``NextToken`` pages).
  ``StopQueryExecution`` cancels a query that has not finished.

The endpoint is this module; its parts: ``athena_api`` (moto's API patched), ``athena_statements``
(statements parsed and rewritten), ``athena_catalog`` (Glue ↔ Spark's metastore), ``athena_mirror`` (S3 ↔
files), ``athena_answers`` (Athena's result shapes and catalog answers), ``athena_caller`` (the caller's IAM)
and ``athena_refusals`` (what Athena refuses).

Gaps against real Athena, said plainly:
- Spark semantics, not Trino's: functions, integer division (``7 / 2`` is 3.5 here), NULL handling of CSV
  (an empty field is NULL here, an empty string with OpenCSVSerde in Athena), result types (inferred from
  Spark's; a ``timestamp with time zone`` only where the select list makes one, written in UTC: see
  ``athena_answers.zoned_columns``). Spark runs in ANSI mode (``spark_semantics.ATHENA``): an invalid
  cast, an overflow and a division by zero fail, as in Trino (a double divided by zero too, which is Infinity in Trino).
- Refused as Athena refuses them (``athena_refusals``): INSERT INTO a bucketed table, a CTAS into a
  location that holds objects, more than 100 partitions written by one statement; a query string over
  262,144 bytes (refused when started, as Athena does).
- ``"$path"`` is read through Spark's ``input_file_name()``, its values mapped back to s3://; a query's
  columns are headed as Athena heads them (``$path``, ``_col<i>`` for an expression without an alias).
- ``DESCRIBE``, ``SHOW CREATE TABLE``, ``SHOW PARTITIONS``, ``SHOW COLUMNS`` and ``SHOW DATABASES`` are
  answered from Glue in Athena's shapes; ``DESCRIBE EXTENDED | FORMATTED`` and other ``SHOW``s are refused.
- Formats: Parquet, ORC, JSON (OpenX and Hive JSON SerDes, keys in any case as they match them:
  ``CatalogSync.respell``; not OpenX's ``mapping.*``) and CSV (OpenCSVSerde,
  LazySimpleSerDe, ``skip.header.line.count`` of 0 or 1) only, text gzip-compressed by its ``.gz`` name; a
  table ``STORED AS INPUTFORMAT 'org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat'`` reads the files its
  manifests list in its SerDe's format, as Athena does (``lakeline.engines.symlink``). A
  ``CREATE TABLE`` is written into Glue as Athena writes it (any SerDe: Athena checks none) and read as
  above. Views, Iceberg, workgroup settings other than the output location and ``DataScannedInBytes`` are
  not emulated. A table whose Glue entry changed is rebuilt in Spark.
- Partition projection: ``date`` projections with a ``storage.location.template`` only; the partitions are
  the template's folders that hold objects, within the projection's range (Athena computes every value of
  the range and reads the folders that exist, which comes to the same rows).
- A query is cancelled only while queued; one that runs finishes (its effects stay) and reports CANCELLED.
- A three-part column reference (``db.table.column``) is not rewritten; ``ExecutionParameters`` are refused.
- ``default`` always exists, as in Athena's catalog; any other database must be in Glue.
- The mirror's path should need no URL escaping: ``"$path"`` comparisons match Spark's file URIs as text.
- Workgroups are moto's: one the deployment did not create is refused at ``StartQueryExecution``.
- ``ClientRequestToken`` as Athena honours it: a start with a token already used gets the query that token
  started (not a second run) if its request is the same, else ``InvalidRequestException`` (kept while the
  endpoint runs; Athena's window is not documented).
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
from pathlib import Path
from typing import Any

from lakeline.engines.base import DEFAULT_DATABASE, QueryError, QueryResult
from lakeline.engines.spark import SparkEngine
from lakeline.engines.spark_semantics import ATHENA
from lakeline.errors import LakelineError
from lakeline.runtimes.deployed.local_aws import athena_api, timings
from lakeline.runtimes.deployed.local_aws.athena_answers import (
    ZONED,
    athena_names,
    athena_text,
    athena_type,
    create_table_statement,
    described_table,
    listed_columns,
    listed_partitions,
    statement_type,
    value_type,
    zoned_columns,
)
from lakeline.runtimes.deployed.local_aws.athena_api import CANCELLED, FAILED, RUNNING, SUCCEEDED, QueryOutcome
from lakeline.runtimes.deployed.local_aws.athena_caller import (
    Needed,
    authorize,
    glue_table,
    iam_enforced,
    needed_for,
    result_file,
)
from lakeline.runtimes.deployed.local_aws.athena_catalog import CatalogSync, listed_buckets
from lakeline.runtimes.deployed.local_aws.athena_mirror import S3Mirror
from lakeline.runtimes.deployed.local_aws.athena_refusals import athena_refusal
from lakeline.runtimes.deployed.local_aws.athena_statements import (
    S3_URI,
    TABLE_NAME,
    LocalAthenaError,
    Rewriter,
    bucket_of,
    unquoted,
)

__all__ = ["LocalAthena", "LocalAthenaError", "install_local_athena"]

logger = logging.getLogger(__name__)

DEFAULT_PREFIX = "athena_local__"
# ``DESCRIBE``, ``SHOW CREATE TABLE``, ``SHOW PARTITIONS`` and ``SHOW COLUMNS`` of one table: answered from
# Glue, Athena's catalog, as Athena (Hive's DDL) answers them; Spark's answers differ in shape (or Spark has
# no such statement) and name its prefixed databases.
DESCRIBE = re.compile(r"^DESCRIBE\s+" + TABLE_NAME + r"$", re.IGNORECASE)
SHOW_CREATE_TABLE = re.compile(r"^SHOW\s+CREATE\s+TABLE\s+" + TABLE_NAME + r"$", re.IGNORECASE)
SHOW_PARTITIONS = re.compile(r"^SHOW\s+PARTITIONS\s+" + TABLE_NAME + r"$", re.IGNORECASE)
SHOW_COLUMNS = re.compile(r"^SHOW\s+COLUMNS\s+(?:IN|FROM)\s+" + TABLE_NAME + r"$", re.IGNORECASE)
# Athena's ``SHOW DATABASES | SCHEMAS [LIKE 'regular expression']``: answered from Glue (Spark's databases
# here are prefixed, and the catalog is Glue's).
SHOW_DATABASES = re.compile(r"^SHOW\s+(?:DATABASES|SCHEMAS)(?:\s+LIKE\s+'(?P<pattern>[^']*)')?$", re.IGNORECASE)
NO_OUTPUT = (
    "No output location provided. An output location is required either through the Workgroup result "
    "configuration setting or as an API input."
)


def install_local_athena(engine: SparkEngine, mirror: Path, *, database_prefix: str = DEFAULT_PREFIX) -> LocalAthena:
    """Make the moto Athena of this process run queries on ``engine`` (see the module's docstring).

    ``mirror``: a folder for the local copies of S3 objects (``<mirror>/<bucket>/<key>``);
    ``database_prefix``: what Spark database names start with (Glue database ``X`` is ``<prefix>X``).
    Call it in the process that runs the moto server; the patches are applied once, a later call
    replaces the endpoint. ``LocalAthena.stop`` ends its worker and gives moto's own behaviour back."""
    return athena_api.install_endpoint(lambda: LocalAthena(engine, mirror, database_prefix))


class LocalAthena:
    """Runs the queries started on moto's Athena, one at a time, on a worker thread."""

    def __init__(self, engine: SparkEngine, mirror: Path, database_prefix: str) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", database_prefix):
            raise LocalAthenaError(f"database prefix {database_prefix!r} must be a lowercase identifier")
        mirror.mkdir(parents=True, exist_ok=True)
        self.engine = engine
        self.names = Rewriter(mirror, database_prefix)
        self.mirror = self.names.mirror
        self._queue: queue.Queue[tuple[Any, Any] | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._starting = threading.Lock()  # not the query lock: a start must not wait for a running query
        self._lock = threading.Lock()  # one query at a time: the metastore, the mirror and their records
        self.catalog = CatalogSync(engine, self.names)
        self.store = S3Mirror(self.mirror)
        self.tokens_lock = threading.Lock()
        self.tokens: dict[tuple[str, str, str], tuple[str, str]] = {}
        """Each ``ClientRequestToken`` started with (account, region, token) → (the request, its query id)."""
        self.executed: list[tuple[str, str]] = []
        """(the query as started, the statement Spark ran) of each query that reached Spark, in order."""

    # -- the worker

    def submit(self, backend: Any, execution: Any) -> None:
        with self._starting:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name="local-athena", daemon=True)
                self._worker.start()
        self._queue.put((backend, execution))

    def stop(self) -> None:
        """End the worker after the queries already started; moto's own Athena answers from then on."""
        if self._worker is not None and self._worker.is_alive():
            self._queue.put(None)
            self._worker.join()
        athena_api.uninstall_endpoint(self)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            backend, execution = item
            if execution.status == CANCELLED:
                continue
            try:
                self.run(backend, execution)
            except Exception as error:  # the worker must outlive any query; the query reports why
                logger.exception("local Athena query %s", execution.id)
                execution.outcome.reason = f"local Athena endpoint error: {type(error).__name__}: {error}"
                execution.status = FAILED

    # -- one query

    def run(self, backend: Any, execution: Any) -> None:
        """Run ``execution`` to its end state (under the lock: one query at a time)."""
        with self._lock:
            started = time.time()
            execution.outcome.queued_ms = int((started - execution.submitted) * 1000)
            timings.record("athena: queued", started - execution.submitted, execution.id)
            execution.status = RUNNING
            try:
                with self.engine.imposed(ATHENA):  # Trino's semantics, where Spark's differ (#36)
                    outcome = self._run(backend, execution)
            except (QueryError, LakelineError) as error:
                reason = getattr(error, "reason", "") or str(error)
                execution.outcome.reason = self.names.s3_text(reason.splitlines()[0] if reason else "failed")
                execution.outcome.engine_ms = int((time.time() - started) * 1000)
                execution.status = FAILED
                return
            outcome.queued_ms = execution.outcome.queued_ms
            outcome.engine_ms = int((time.time() - started) * 1000)
            execution.outcome = outcome
            execution.status = SUCCEEDED

    def _run(self, backend: Any, execution: Any) -> QueryOutcome:
        from moto.glue.models import glue_backends
        from moto.s3.models import s3_backends

        glue = glue_backends[backend.account_id][backend.region_name]
        s3 = s3_backends[backend.account_id]["aws"]
        output = execution.config.get("OutputLocation")
        if not output:
            raise LocalAthenaError(NO_OUTPUT)
        if execution.execution_parameters:
            raise LocalAthenaError("ExecutionParameters are not supported by the local Athena endpoint")
        text = execution.query.strip().rstrip(";").strip()
        shown = SHOW_DATABASES.match(text)
        if shown is not None:
            return self._show_databases(glue, s3, backend, execution, output, shown.group("pattern"))
        context = (execution.context or {}).get("Database")
        for pattern, answer in (
            (DESCRIBE, described_table),
            (SHOW_CREATE_TABLE, create_table_statement),
            (SHOW_PARTITIONS, listed_partitions),
            (SHOW_COLUMNS, listed_columns),
        ):
            named = pattern.match(text)
            if named is not None:
                return self._from_glue(glue, s3, backend, execution, output, named.group("name"), answer)
        if re.match(r"DESCRIBE\b", text, re.IGNORECASE):
            raise LocalAthenaError(
                f"statement is not supported by the local Athena endpoint: {text[:80]} (DESCRIBE [db.]table is)"
            )
        root = output.rsplit("/", 1)[0]
        statement = self.names.statement(execution.query, context, ctas_root=f"{root}/tables/{execution.id}/")
        began = time.monotonic()
        caller = getattr(execution, "caller", None)
        if caller is not None and iam_enforced():
            needed = needed_for(glue, statement, backend.region_name, backend.account_id, output)
            authorize(backend.account_id, backend.region_name, caller, needed)
        buckets = self.catalog.sync(glue, statement)
        if statement.defines is not None:
            # As Athena's, a table's DDL only writes the catalog (Spark's Hive DDL would need the SerDe's
            # class): the table is made in Spark from Glue before the next query that names it.
            self.catalog.define(glue, statement, statement.defines)
            outcome = QueryOutcome(statement_type=statement_type(execution.query))
            self._put_results(s3, output, outcome)
            return outcome
        buckets |= {bucket for bucket in (bucket_of(uri) for uri in statement.locations) if bucket}
        buckets |= listed_buckets(glue, s3, statement)
        for bucket in sorted(buckets):
            self.store.pull(s3, bucket)
        self.catalog.respell(glue, statement)
        self.catalog.project_partitions(glue, statement)
        refused = athena_refusal(
            statement.kind, statement.sql, statement.changes, statement.writes_to, glue, s3, self.engine
        )
        if refused:
            raise LocalAthenaError(refused)
        self.executed.append((execution.query, statement.sql))
        ready = time.monotonic()
        failure: LakelineError | None = None
        result = QueryResult(query_id=execution.id)
        # A symlink table's manifests name s3:// files: Spark reads them from the mirror.
        outside, self.engine.symlink_target = self.engine.symlink_target, self.names.local_uri
        try:
            result = self.engine.execute(statement.sql)
        except LakelineError as error:  # QueryFailed, or a statement the translation refuses
            failure = error
        except Exception:
            self.catalog.forget(statement.changes)  # unknown state: made again from Glue next time
            raise
        finally:
            self.engine.symlink_target = outside
        ran = time.monotonic()
        # What ran changed files and the metastore even when it failed part way.
        written = self.catalog.write_back(glue, statement, succeeded=failure is None)
        for bucket in sorted(buckets | written):
            self.store.push(s3, bucket)
        timings.record("athena: catalog and mirror in", ready - began, execution.id)
        timings.record("athena: Spark SQL", ran - ready, execution.id)
        logger.debug(
            "local Athena %s: %.3fs catalog and mirror in, %.3fs Spark, %.3fs back: %s",
            execution.id,
            ready - began,
            ran - ready,
            time.monotonic() - ran,
            statement.sql,
        )
        if failure is not None:
            raise failure
        outcome = QueryOutcome(statement_type=statement_type(execution.query))
        zoned = [False] * len(result.columns)
        if statement.is_query:
            kinds = self._result_types(result)
            zoned = zoned_columns(execution.query, len(result.columns))
            kinds = [ZONED if zone else kind for kind, zone in zip(kinds, zoned, strict=True)]
            names = athena_names(execution.query, result.columns)
            outcome.columns = list(zip(names, kinds, strict=True))
            outcome.rows = [list(names)]
        elif outcome.statement_type == "UTILITY":
            # SHOW ... answers rows as text, without a header row (Athena writes them to a .txt file).
            if not result.columns:
                raise LocalAthenaError(f"statement is not supported by the local Athena endpoint: {text[:80]}")
            outcome.columns = [(name, "varchar") for name in result.columns]
        outcome.rows += [
            [self._text(value, zone) for value, zone in zip(row, zoned, strict=False)] for row in result.rows
        ]
        self._put_results(s3, output, outcome)
        timings.record("athena: write back, mirror out, results", time.monotonic() - ran, execution.id)
        return outcome

    def _show_databases(
        self, glue: Any, s3: Any, backend: Any, execution: Any, output: str, pattern: str | None
    ) -> QueryOutcome:
        """``SHOW DATABASES``: Glue's databases (and ``default``, which Athena's catalog always has), those
        whose whole name matches ``pattern`` (a regular expression, as Athena's) if one is given."""
        caller = getattr(execution, "caller", None)
        if caller is not None and iam_enforced():
            catalog = f"arn:aws:glue:{backend.region_name}:{backend.account_id}:catalog"
            needed = [Needed("glue:GetDatabases", (catalog,), "is not authorized"), result_file(output)]
            authorize(backend.account_id, backend.region_name, caller, needed)
        try:
            matches = re.compile(pattern or ".*", re.IGNORECASE)
        except re.error as error:
            raise LocalAthenaError(f"SHOW DATABASES: LIKE '{pattern}' is not a regular expression: {error}") from None
        names = sorted({DEFAULT_DATABASE, *glue.databases})
        outcome = QueryOutcome(statement_type="UTILITY", columns=[("database_name", "string")])
        outcome.rows = [[name] for name in names if matches.fullmatch(name)]
        self._put_results(s3, output, outcome)
        return outcome

    def _from_glue(
        self,
        glue: Any,
        s3: Any,
        backend: Any,
        execution: Any,
        output: str,
        name: str,
        answer: Any,
    ) -> QueryOutcome:
        """A statement about one table answered from its Glue entry by ``answer`` (database, table, entry)
        → (columns, rows)."""
        parts = [unquoted(part) for part in name.split(".")]
        context = str((execution.context or {}).get("Database") or DEFAULT_DATABASE).lower()
        database, table = (parts[0], parts[1]) if len(parts) == 2 else (context, parts[0])
        caller = getattr(execution, "caller", None)
        if caller is not None and iam_enforced():
            arns = glue_table(backend.region_name, backend.account_id, database, table)
            needed = [Needed("glue:GetTable", arns, "is not authorized"), result_file(output)]
            authorize(backend.account_id, backend.region_name, caller, needed)
        found = glue.databases.get(database)
        entry = found.tables.get(table) if found is not None else None
        if entry is None:
            raise LocalAthenaError(f"FAILED: SemanticException [Error 10001]: Table not found {database}.{table}")
        columns, rows = answer(database, table, entry)
        outcome = QueryOutcome(statement_type="UTILITY", columns=columns, rows=rows)
        self._put_results(s3, output, outcome)
        return outcome

    # -- results

    def _result_types(self, result: QueryResult) -> list[str]:
        """Athena's type names for the result's columns, from the schema of the query Spark ran."""
        kinds = [athena_type(kind) for kind in result.types]
        if len(kinds) != len(result.columns):
            kinds = [value_type([row[i] for row in result.rows]) for i in range(len(result.columns))]
        return kinds

    def _text(self, value: Any, zoned: bool = False) -> str | None:
        text = athena_text(value)
        if zoned and text is not None:
            return f"{text} UTC"  # Spark's timestamp is the UTC instant (its session's zone): Athena names it
        return None if text is None else self.names.s3_text(text) if text.startswith("file:") else text

    def _put_results(self, s3: Any, output: str, outcome: QueryOutcome) -> None:
        found = S3_URI.match(output)
        if found is None:
            raise LocalAthenaError(f"output location {output} is not an s3:// location")
        if outcome.statement_type == "DML":
            lines = [
                ",".join("" if v is None else '"' + v.replace('"', '""') + '"' for v in row) for row in outcome.rows
            ]
        else:
            lines = ["\t".join("" if v is None else v for v in row) for row in outcome.rows]
        body = "".join(f"{line}\n" for line in lines).encode()
        try:
            s3.put_object(found.group("bucket"), found.group("key"), body)
        except Exception as error:
            raise LocalAthenaError(f"Unable to write the query results to {output}: {type(error).__name__}") from error
