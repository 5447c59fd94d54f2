"""SparkEngine: Athena-dialect SQL on PySpark.

Locally it is embedded: ``local[*]`` with a Derby Hive metastore and a warehouse inside the workspace,
one session for a whole run. On AWS Glue for Spark the same class wraps the job's session, whose
catalog is the Glue Data Catalog.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakeline.catalog_locations import CatalogUnreadable, local_catalog, set_local_catalog
from lakeline.engines.base import Column, QueryFailed, QueryResult, TableNotFound, TableSchema
from lakeline.engines.jvm_archive import archive_folder, archive_options, discard_unusable
from lakeline.engines.spark_partitions import PartitionStatements
from lakeline.engines.spark_semantics import DEPLOYED_SPARK, SESSION_SETTINGS, SqlSemantics, applied
from lakeline.engines.symlink import SymlinkTable, is_symlink_table, parse_symlink_table
from lakeline.engines.translate import SPARK_FORMATS, CtasProperties, SparkCtas, translate_statement
from lakeline.errors import LakelineError
from lakeline.names import ddl_name, string_literal
from lakeline.storage import normalize_location

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

logger = logging.getLogger(__name__)
BUCKET_FILE = re.compile(r"_(\d{5})(?:\.c\d{3})?\.")
# A file the DataFrame writer names after its task: part-<task>-<job uuid>-c<counter><extension>.
TASK_FILE = re.compile(r"^part-(?P<task>\d{5})-(?P<job>[0-9a-f-]{36})-(?P<counter>c\d{3})(?P<extension>\..*)?$")
# Statements that leave every table's schema and location as they are. Any other statement forgets what
# the engine remembers about the table it names (or about every table, when it names none we can read).
KEEPS_TABLES = re.compile(
    r"^\s*(?:(?:SELECT|WITH|INSERT|SHOW|DESCRIBE)\b"
    r"|ALTER\s+TABLE\s+[^\s(]+\s+(?:ADD\s+(?:IF\s+NOT\s+EXISTS\s+)?PARTITION\b|PARTITION\s*\())",
    re.IGNORECASE,
)
ADDS_PARTITION = re.compile(r"^\s*ALTER\s+TABLE\s+[^\s(]+\s+ADD\s+IF\s+NOT\s+EXISTS\s+PARTITION\b", re.IGNORECASE)
NAMED_TABLE = re.compile(
    r"^\s*(?:DROP\s+TABLE(?:\s+IF\s+EXISTS)?|CREATE(?:\s+OR\s+REPLACE)?(?:\s+EXTERNAL)?\s+TABLE"
    r"(?:\s+IF\s+NOT\s+EXISTS)?|ALTER\s+TABLE|TRUNCATE\s+TABLE|MSCK\s+REPAIR\s+TABLE|REFRESH\s+TABLE)"
    r"\s+(?P<name>[^\s(]+)",
    re.IGNORECASE,
)


DROPS_TABLE = re.compile(r"^\s*DROP\s+TABLE(?:\s+IF\s+EXISTS)?\s+(?P<name>[^\s(]+)\s*$", re.IGNORECASE)
STORAGE_SEPARATOR = re.compile(r"[\[ ,](sep|delimiter)=(.)")


def _table_key(name: str) -> str:
    return name.replace("`", "").replace('"', "").lower()


@dataclass(frozen=True)
class WrittenTable:
    """A CTAS table whose files are written but which is not in the metastore yet (see ``_write_ctas``)."""

    definition: str  # the CREATE TABLE statement that registers it over its files
    name: str  # the table's own name, lowercased, to spot statements that may read it


# The JVM of a session over little data: C1-compiled code only and a one-thread collector. Measured on the
# 2-core machine (a session, its first Hive query and 45 small statements), it uses about half the CPU of
# the default JVM (42 -> 22 CPU seconds) and starts sooner; a scan of millions of rows runs about 1.5x
# slower, so sessions over much data keep the default JVM (``quick_start=False``).
QUICK_START_JAVA_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def local_spark_session(
    workspace: Path,
    *,
    master: str = "local[*]",
    shuffle_partitions: int = 8,
    driver_memory: str = "2g",
    app_name: str = "lakeline",
    quick_start: bool = False,
    archives: Path | None = None,
) -> SparkSession:
    """The embedded session: metastore and warehouse live in ``workspace``, not in the current folder.
    ``quick_start``: the JVM for little data (``QUICK_START_JAVA_OPTIONS``). ``archives``: where the JVM's
    class-data archive is kept (``lakeline.engines.jvm_archive``; the user's cache folder by default).

    Only one session can exist per Python process, and its metastore and JVM options are fixed when it starts.
    """
    from pyspark.sql import SparkSession

    workspace = workspace.resolve()
    metastore = workspace / "metastore"
    metastore.mkdir(parents=True, exist_ok=True)
    set_aside_half_made_metastore(metastore)
    log_config = Path(__file__).with_name("log4j2.properties")
    java_options = f"-Dderby.system.home={metastore} -Dlog4j.configurationFile=file:{log_config}"
    # A JVM that crashes (a class-data archive cut short maps as SIGBUS) writes its report beside its log, not
    # into whatever folder the command was run from.
    (workspace / "state").mkdir(parents=True, exist_ok=True)
    java_options += f" -XX:ErrorFile={workspace / 'state' / 'hs_err_pid%p.log'}"
    if quick_start:
        java_options = " ".join((java_options, *QUICK_START_JAVA_OPTIONS))
    archive = archive_options(archives or archive_folder(), java_options)
    # Without it Spark warns that the hostname resolves to a loopback address on every start.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.warehouse.dir", str(workspace / "warehouse"))
        .config(
            "spark.hadoop.javax.jdo.option.ConnectionURL",
            f"jdbc:derby:;databaseName={metastore / 'metastore_db'};create=true",
        )
        .config("spark.driver.extraJavaOptions", " ".join((java_options, *archive)))
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        # List a partition's files on every query instead of caching them until the partition is
        # re-registered: files arrive in partitions that exist already, and listing a local folder is cheap.
        .config("spark.sql.hive.filesourcePartitionFileCacheSize", "0")
        .enableHiveSupport()
    )
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:  # this process's JVM runs already (tests share one)
        session = builder.getOrCreate()
    else:
        try:
            with jvm_output_to(workspace / "state" / "spark.log"):
                session = builder.getOrCreate()
        except LakelineError:
            if not discard_unusable(archive):
                raise
            # An archive the JVM could not map (one cut short) is gone; this start goes without it.
            logging.getLogger(__name__).warning("the JVM could not use its class-data archive; it is removed")
            builder.config("spark.driver.extraJavaOptions", java_options)
            with jvm_output_to(workspace / "state" / "spark.log"):
                session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    quiet_query_context_loggers()
    return session


MAX_JVM_LOG_BYTES = 10 * 1024**2


def set_aside_half_made_metastore(metastore: Path) -> Path | None:
    """A Derby database folder without its ``service.properties`` is one whose creation was stopped (a
    kill while the first command of a workspace started Spark): Derby refuses to boot or re-create it
    (XBM0A), so every later command would fail. Such a folder never held a table (Derby writes the file
    before anything else can be stored), so it is moved aside (``metastore_db.half-made``, for a look)
    and the next start creates the metastore anew. Returns where it went, if it was."""
    database = metastore / "metastore_db"
    if not database.is_dir() or (database / "service.properties").exists():
        return None
    aside = metastore / "metastore_db.half-made"
    shutil.rmtree(aside, ignore_errors=True)
    database.replace(aside)
    logging.getLogger(__name__).warning("moved a half-made metastore aside to %s; a new one is created", aside)
    return aside


@contextmanager
def jvm_output_to(log: Path) -> Iterator[None]:
    """Start the JVM with its standard error in ``log``: its start-up chatter (``Using incubator
    modules``, ``Setting default log level``) and anything it prints later stay out of the user's
    console and pipe, where the engine's own one-line errors go. A JVM that cannot start is an error
    that quotes the end of the log. The log is rotated past 10 MB (one ``.1`` kept)."""
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        if log.exists() and log.stat().st_size > MAX_JVM_LOG_BYTES:
            log.replace(log.with_name(log.name + ".1"))
        output = log.open("ab")
    except OSError as error:  # a read-only workspace: the JVM speaks on the console, as it would anyway
        logging.getLogger(__name__).warning("Spark's output stays on the console: cannot write %s (%s)", log, error)
        yield
        return
    with output:
        output.write(f"--- {datetime.now(UTC).isoformat()} pid {os.getpid()}: {' '.join(sys.argv[:2])}\n".encode())
        output.flush()
        ours = output.tell()  # what this start writes comes after
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(output.fileno(), 2)  # the JVM is a child process: it inherits descriptor 2 as it is now
        try:
            yield
        except Exception as error:
            os.dup2(saved, 2)
            with log.open("rb") as written:
                written.seek(ours)
                tail = written.read().decode(errors="replace").splitlines()[-5:]
            raise LakelineError(
                f"embedded Spark did not start: {_first_line(error)}; {log} ends: {' | '.join(tail)}"
            ) from error
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def quiet_query_context_loggers() -> None:
    """PySpark logs every failed query's error with its Java stack as JSON on stderr (~8 KB) before
    raising it; the engine raises the same error as one line (``failure_reason``), so the log is off.
    The loggers are PySpark's own class: it calls them with keyword arguments a plain logger refuses."""
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


ERROR_CONDITION = re.compile(r"^\[[A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*\] ")
MAX_CAUSES = 32


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _java_causes(throwable: Any) -> list[tuple[str, str]]:
    """(class name, message) of a Java exception and each of its causes, outermost first."""
    causes: list[tuple[str, str]] = []
    while throwable is not None and len(causes) < MAX_CAUSES:
        message = throwable.getMessage()
        causes.append((str(throwable.getClass().getSimpleName()), str(message or "").strip()))
        cause = throwable.getCause()
        throwable = None if cause is None or cause.equals(throwable) else cause
    return causes


def failure_reason(error: BaseException) -> str:
    """The cause of a Spark failure in one line, without a Java stack.

    Py4J's own text is ``An error occurred while calling o43.sql.``; the cause is in the Java exception
    chain behind it (a failed task wraps it in "Job aborted ..." with a stack inside the message). The
    reason is the innermost exception that carries a Spark error condition (``[FAILED_READ_FILE...]
    ... file ... column ... type``), else the innermost with a message, followed by the root cause
    when that is another exception."""
    from py4j.protocol import Py4JError

    throwable = getattr(error, "java_exception", None) or getattr(error, "_origin", None)
    try:
        causes = [(name, message.splitlines()[0]) for name, message in _java_causes(throwable) if message]
    except Py4JError:  # the JVM is gone: the Python text is all there is
        causes = []
    if not causes:
        return _first_line(error)
    with_condition = [index for index, (_, message) in enumerate(causes) if ERROR_CONDITION.match(message)]
    chosen = with_condition[-1] if with_condition else len(causes) - 1
    reason = causes[chosen][1]
    root_name, root_message = causes[-1]
    if chosen == len(causes) - 1 or root_message in reason:
        return reason
    return f"{reason} (caused by {root_name}: {root_message})"


@dataclass(frozen=True)
class Relocated:
    """What ``SparkEngine.relocate`` moved, and the databases it could not (they keep their old place,
    where a table created in them without a location would go)."""

    tables: int
    partitions: int
    stuck_databases: tuple[str, ...] = ()


def _tables_of(catalog: Any, database: str) -> Iterator[Any]:
    """Every table of ``database`` in Spark's external catalog (its ``CatalogTable`` objects)."""
    names = catalog.listTables(database)
    for index in range(names.size()):
        yield catalog.getTable(database, names.apply(index))


@dataclass(frozen=True)
class CatalogEntry:
    """A table (``partition`` empty) or one of its partitions, and where the metastore points it."""

    database: str
    table: str
    partition: dict[str, str]
    location: str


class SparkEngine:
    """Runs Athena-dialect statements on a SparkSession, translating them first, with ``semantics``:
    the settings of the deployed engine it stands for (``spark_semantics``; the Glue job's Spark)."""

    name = "spark"

    def __init__(self, session: SparkSession, semantics: SqlSemantics = DEPLOYED_SPARK) -> None:
        self.session = session
        self.semantics = semantics
        self._imposed: SqlSemantics | None = None  # set by ``imposed``, under SESSION_SETTINGS
        # What this engine has read or done to the catalog, until a statement may have changed it: table
        # schemas, and the ``ADD IF NOT EXISTS PARTITION`` statements that succeeded (running one again
        # changes nothing, but costs a metastore round trip on every arrival).
        self._schemas: dict[str, TableSchema] = {}
        self._added_partitions: dict[str, set[str]] = {}
        # CTAS tables written to their location but not registered yet: most are dropped unread.
        self._written: dict[str, WrittenTable] = {}
        self._partitions = PartitionStatements(session)
        # Symlink tables (``lakeline.engines.symlink``): read as Athena reads them, never in the metastore.
        self._symlinks: dict[str, SymlinkTable] = {}
        self.symlink_target: Callable[[str], str] = str
        """Where a manifest's line is read from (the local Athena maps s3:// to its mirror)."""

    @classmethod
    def local(cls, workspace: Path, **session_options: Any) -> SparkEngine:
        return cls(local_spark_session(workspace, **session_options))

    @contextmanager
    def imposed(self, semantics: SqlSemantics) -> Iterator[None]:
        """Run this engine's statements, and whatever else the block does on the session, with
        ``semantics`` (the local Athena runs a query as Athena's on the engine it was given)."""
        with SESSION_SETTINGS, applied(self.session, semantics):
            before, self._imposed = self._imposed, semantics
            try:
                yield
            finally:
                self._imposed = before

    def execute(self, sql: str, *, database: str | None = None) -> QueryResult:
        with SESSION_SETTINGS, applied(self.session, self._imposed or self.semantics):
            return self._execute(sql, database=database)

    def _execute(self, sql: str, *, database: str | None = None) -> QueryResult:
        from py4j.protocol import Py4JJavaError
        from pyspark.errors import PySparkException

        semantics = self._imposed or self.semantics
        if is_symlink_table(sql):
            self.define_symlink(*parse_symlink_table(sql))
            return QueryResult(query_id=f"spark-{uuid.uuid4()}")
        if self._symlinks:
            dropped = DROPS_TABLE.match(sql)
            if dropped and self._symlinks.pop(_table_key(dropped.group("name")), None) is not None:
                return QueryResult(query_id=f"spark-{uuid.uuid4()}")
            sql = self._read_symlinks(sql)
        translated = translate_statement(
            sql, integer_division=self._column_types if semantics.integer_division else None, database=database
        )
        spark_sql = translated.sql
        self._partitions.next_statement()
        query_id = f"spark-{uuid.uuid4()}"
        named = NAMED_TABLE.match(spark_sql)
        table = _table_key(named.group("name")) if named else None
        if self._written:
            dropped = DROPS_TABLE.match(spark_sql)
            if dropped and self._written.pop(_table_key(dropped.group("name")), None) is not None:
                # Never registered, so there is no catalog entry to remove; the files stay, as for any
                # external table.
                return QueryResult(query_id=query_id)
            self._register_written(spark_sql)
        # Remembered per qualified table only: an unqualified name depends on the current database.
        remembered = table is not None and "." in table and ADDS_PARTITION.match(spark_sql) is not None
        if remembered and spark_sql in self._added_partitions.get(str(table), ()):
            logger.debug("spark %s: done already: %s", query_id, spark_sql)
            return QueryResult(query_id=query_id)
        if not KEEPS_TABLES.match(spark_sql):
            self._forget(table)
        logger.debug("spark %s: %s", query_id, spark_sql)
        try:
            # Setting it checks that the database exists (a metastore round trip); reading it does not.
            if database and self.session.catalog.currentDatabase() != database:
                self.session.catalog.setCurrentDatabase(database)
            if translated.ctas is not None and table is not None and self._can_write_first(translated.ctas, table):
                self._write_ctas(translated.ctas, table)
                return QueryResult(query_id=query_id)
            if self._partitions.run(spark_sql):
                if remembered:
                    self._added_partitions.setdefault(str(table), set()).add(spark_sql)
                return QueryResult(query_id=query_id)
            if table is not None:  # a partition-level ALTER as SQL: what is kept of the table's partitions may be stale
                self._partitions.forget(table)
            frame = self.session.sql(spark_sql)
            rows = [tuple(row) for row in frame.collect()]
            if translated.ctas is not None:
                self._write_empty_buckets(translated.ctas.properties, self.session.table(translated.ctas.table).schema)
        except (PySparkException, Py4JJavaError) as error:
            reason = failure_reason(error)
            raise QueryFailed(f"Spark statement failed: {reason}", sql=sql, query_id=query_id, reason=reason) from error
        if remembered:
            self._added_partitions.setdefault(str(table), set()).add(spark_sql)
        fields = frame.schema.fields  # analyzed already (``columns`` reads it): no second round trip
        return QueryResult(
            query_id=query_id,
            columns=[column.name for column in fields],
            rows=rows,
            types=[column.dataType.simpleString() for column in fields],
        )

    def define_symlink(self, name: str, table: SymlinkTable) -> None:
        """Keep the symlink table ``name`` (``database.table``) to read it when a statement names it."""
        key = _table_key(name)
        if key in self._symlinks or self.session.catalog.tableExists(key):
            reason = f"[TABLE_OR_VIEW_ALREADY_EXISTS] Cannot create table or view {key} because it already exists."
            raise QueryFailed(f"Spark statement failed: {reason}", sql=name, reason=reason)
        self._symlinks[key] = table

    def _read_symlinks(self, sql: str) -> str:
        """``sql`` reading each symlink table it names through a temporary view of the files its manifests
        list, loaded with the table's format (an empty manifest: no rows)."""
        for key, table in self._symlinks.items():
            database, name = key.split(".", 1)
            named = re.compile(
                rf"[`\"]?{re.escape(database)}[`\"]?\s*\.\s*[`\"]?{re.escape(name)}[`\"]?(?![A-Za-z0-9_])",
                re.IGNORECASE,
            )
            if not named.search(sql):
                continue
            view = f"lakeline_symlink_{uuid.uuid4().hex}"
            self._symlink_frame(key, table).createOrReplaceTempView(view)
            sql = named.sub(view, sql)
        return sql

    def _symlink_frame(self, key: str, table: SymlinkTable) -> Any:
        from pyspark.errors import PySparkException

        try:
            lines = [str(row[0]).strip() for row in self.session.read.text(table.location).collect()]
        except PySparkException as error:
            reason = f"the manifests of symlink table {key} at {table.location} cannot be read: {failure_reason(error)}"
            raise QueryFailed(f"Spark statement failed: {reason}", sql=key, reason=reason) from error
        paths = [self.symlink_target(line) for line in lines if line]
        reading = self.session.read.format(table.format).schema(table.columns)
        for option, value in table.options.items():
            reading = reading.option(option, value)
        if not paths:
            return self.session.createDataFrame([], table.columns)
        return reading.load(paths)

    def _forget(self, table: str | None) -> None:
        """Forget what was remembered about ``table`` (``db.table``), or about every table."""
        self._partitions.forget(table)
        if table is None or "." not in table:
            self._schemas.clear()
            self._added_partitions.clear()
            return
        self._schemas.pop(table, None)
        self._added_partitions.pop(table, None)

    def _external_catalog(self) -> Any:
        return self.session._jsparkSession.sharedState().externalCatalog()

    def _filesystem(self, location: str) -> tuple[Any, Any]:
        """The Hadoop path of ``location`` and the file system it lives on (local, S3)."""
        jvm: Any = self.session.sparkContext._jvm
        root = jvm.org.apache.hadoop.fs.Path(location)
        return root, root.getFileSystem(self.session.sparkContext._jsc.hadoopConfiguration())

    def _can_write_first(self, ctas: SparkCtas, table: str) -> bool:
        """A CTAS into its own location, unpartitioned, with a qualified name: its files can be written
        before (and mostly instead of) its catalog entry. Stage runs drop such tables unread, and an
        entry made and removed costs two metastore round trips per run."""
        return bool(ctas.properties.external_location) and not ctas.properties.partitioned_by and "." in table

    def _write_ctas(self, ctas: SparkCtas, table: str) -> None:
        """Write a CTAS's result as Spark's own CTAS would (the same files, bucket names and checks),
        and remember the table to register the first time a statement may read it."""
        props = ctas.properties
        location = str(props.external_location)
        database, name = table.rsplit(".", 1)
        if table in self._written or self._external_catalog().tableExists(database, name):
            reason = f"[TABLE_OR_VIEW_ALREADY_EXISTS] Cannot create table or view {table} because it already exists."
            raise QueryFailed(f"Spark statement failed: {reason}", sql=ctas.sql, reason=reason)
        root, filesystem = self._filesystem(location)
        if filesystem.exists(root) and len(filesystem.listStatus(root)):
            reason = f"CREATE-TABLE-AS-SELECT cannot create table with location to a non-empty directory {location}."
            raise QueryFailed(f"Spark statement failed: {reason}", sql=ctas.sql, reason=reason)
        frame = self.session.sql(ctas.query)
        writer = frame.write.format(SPARK_FORMATS[props.format]).mode("append")
        if props.compression:
            writer = writer.option("compression", props.compression)
        if props.format == "TEXTFILE":
            writer = writer.option("sep", props.field_delimiter or chr(1))
        writer.save(location)
        if props.bucket_count:
            try:
                self._name_buckets(root, filesystem)
            except OSError as error:
                raise QueryFailed(f"Spark statement failed: {error}", sql=ctas.sql, reason=str(error)) from error
            self._write_empty_buckets(props, frame.schema, (root, filesystem))
        columns = frame._jdf.schema().toDDL()
        self._written[table] = WrittenTable(
            definition=f"CREATE TABLE {ctas.table} ({columns}) {ctas.definition}", name=name
        )

    def _name_buckets(self, root: Any, filesystem: Any) -> None:
        """Name each file of a bucketed write (in ``root`` on ``filesystem``) after its bucket, as Spark's
        bucketed CTAS does (``part-00001-<job>_00001.c000.snappy.parquet``). The query's last step is the
        hash repartition into ``bucket_count`` tasks, so task N wrote bucket N."""
        jvm: Any = self.session.sparkContext._jvm
        for status in filesystem.listStatus(root):
            found = TASK_FILE.match(status.getPath().getName())
            if status.isFile() and found:
                task, job, counter, extension = found.group("task", "job", "counter", "extension")
                named = jvm.org.apache.hadoop.fs.Path(root, f"part-{task}-{job}_{task}.{counter}{extension or ''}")
                if not filesystem.rename(status.getPath(), named):
                    raise OSError(f"cannot rename {status.getPath()} to {named}")

    def _register_written(self, spark_sql: str) -> None:
        """Register the written CTAS tables this statement names (it may read or change them)."""
        text = _table_key(spark_sql)
        for key, written in list(self._written.items()):
            if written.name in text:
                self._register(key)

    def _register(self, key: str) -> None:
        written = self._written.pop(key, None)
        if written is not None:
            logger.debug("spark: registering %s", key)
            self.session.sql(written.definition)

    def _write_empty_buckets(
        self, ctas: CtasProperties, schema: StructType, place: tuple[Any, Any] | None = None
    ) -> None:
        """Athena writes one file per bucket even when a bucket is empty; Spark writes none for it.
        Top the CTAS output up with empty files of the same schema, so ``bucket_count = N`` always
        means N files, as readers of a bucketed table expect. ``place``: the location's Hadoop path
        and file system, if the caller has them (``_filesystem``)."""
        if not ctas.bucket_count or not ctas.external_location or ctas.partitioned_by:
            return
        jvm: Any = self.session.sparkContext._jvm
        hadoop = self.session.sparkContext._jsc.hadoopConfiguration()
        root, filesystem = place or self._filesystem(ctas.external_location)
        present: set[int] = set()
        for status in filesystem.listStatus(root):
            name = status.getPath().getName()
            match = BUCKET_FILE.search(name)
            if status.isFile() and match and not name.startswith(("_", ".")):
                present.add(int(match.group(1)))
        missing = [bucket for bucket in range(ctas.bucket_count) if bucket not in present]
        if not missing:
            return
        scratch = ctas.external_location.rstrip("/") + f"/_lakeline_empty_{uuid.uuid4().hex}"
        writer = self.session.createDataFrame([], schema).coalesce(1).write.format(SPARK_FORMATS[ctas.format])
        if ctas.compression:  # the table's compression, not the writer's default: readers see one kind of file
            writer = writer.option("compression", ctas.compression)
        writer.save(scratch)
        (empty,) = [
            s.getPath()
            for s in filesystem.listStatus(jvm.org.apache.hadoop.fs.Path(scratch))
            if s.getPath().getName().startswith("part-")
        ]
        suffix = empty.getName().split(".", 1)[1] if "." in empty.getName() else ""
        job = uuid.uuid4()
        for bucket in missing:
            target = jvm.org.apache.hadoop.fs.Path(root, f"part-{bucket:05d}-{job}_{bucket:05d}.{suffix}")
            jvm.org.apache.hadoop.fs.FileUtil.copy(filesystem, empty, filesystem, target, False, hadoop)
        filesystem.delete(jvm.org.apache.hadoop.fs.Path(scratch), True)
        logger.debug("wrote %d empty bucket files into %s", len(missing), ctas.external_location)

    def table_exists(self, database: str, table: str) -> bool:
        if f"{database}.{table}".lower() in self._written or f"{database}.{table}".lower() in self._symlinks:
            return True
        return bool(self.session.catalog.tableExists(f"{database}.{table}"))

    def describe_table(self, database: str, table: str) -> TableSchema:
        key = f"{database}.{table}".lower()
        if key not in self._schemas:
            self._schemas[key] = self._read_table(database, table)
        return self._schemas[key]

    def _read_table(self, database: str, table: str) -> TableSchema:
        self._register(f"{database}.{table}".lower())
        if not self.table_exists(database, table):
            raise TableNotFound(database, table)
        columns = self.session.catalog.listColumns(f"{database}.{table}")
        location = provider = delimiter = None
        multiline = False
        for row in self.session.sql(f"DESCRIBE TABLE EXTENDED {ddl_name(database, table)}").collect():
            if row["col_name"] == "Location":
                location = normalize_location(str(row["data_type"])).rstrip("/") + "/"
            elif row["col_name"] == "Provider":
                provider = str(row["data_type"]).lower()
            elif row["col_name"] == "Storage Properties":
                found = STORAGE_SEPARATOR.search(str(row["data_type"]))
                delimiter = found.group(2) if found else None
                multiline = "multiline=true" in str(row["data_type"]).lower()
        return TableSchema(
            database=database,
            table=table,
            columns=tuple(Column(c.name, c.dataType) for c in columns if not c.isPartition),
            partition_columns=tuple(Column(c.name, c.dataType) for c in columns if c.isPartition),
            location=location,
            format=provider,
            delimiter=delimiter,
            multiline_fields=multiline,
        )

    def add_columns(self, database: str, table: str, columns: tuple[Column, ...]) -> None:
        """Add the columns the table lacks of ``columns``, after its own."""
        present = {column.name.lower() for column in self.describe_table(database, table).columns}
        missing = [column for column in columns if column.name.lower() not in present]
        if missing:
            listed = ", ".join(f"{ddl_name(column.name)} {column.type}" for column in missing)
            self.execute(f"ALTER TABLE {ddl_name(database, table)} ADD COLUMNS ({listed})")

    def partition_location(self, database: str, table: str, partition: dict[str, str]) -> str | None:
        """Where a partition's data is, as a URI, or ``None`` if the partition does not exist."""
        spec = ", ".join(f"{ddl_name(column)} = {string_literal(value)}" for column, value in partition.items())
        try:
            return self._described_location(f"DESCRIBE FORMATTED {ddl_name(database, table)} PARTITION ({spec})")
        except Exception:
            return None

    def _described_location(self, describe_sql: str) -> str | None:
        """The ``Location`` row of a ``DESCRIBE FORMATTED`` statement, as a URI ending with '/'."""
        for row in self.session.sql(describe_sql).collect():
            if row["col_name"] == "Location":
                return normalize_location(str(row["data_type"])).rstrip("/") + "/"
        return None

    def _column_types(self, database: str, table: str) -> dict[str, str]:
        """A table's column types as sqlglot reads them (``{}`` if the table is not in the catalog)."""
        try:
            schema = self.describe_table(database, table)
        except (TableNotFound, QueryFailed):
            return {}
        return {column.name: column.type for column in (*schema.columns, *schema.partition_columns)}

    def catalog_location(self, database: str, table: str, partition: Mapping[str, str]) -> str | None:
        """Where the metastore points the table's ``partition`` (the table itself for an empty one), read
        afresh; ``None`` if it has no such table or partition (``lakeline.catalog_locations``)."""
        name = ddl_name(database, table)
        try:
            self._register(f"{database}.{table}".lower())
            if not self.session.catalog.tableExists(f"{database}.{table}"):
                return None
            sql = f"DESCRIBE FORMATTED {name}"
            if partition:
                keys = {column.name.lower() for column in self._read_table(database, table).partition_columns}
                if keys != {key.lower() for key in partition}:
                    return None
                spec = ", ".join(f"{ddl_name(key)} = {string_literal(value)}" for key, value in partition.items())
                if not self.session.sql(f"SHOW PARTITIONS {name} PARTITION ({spec})").collect():
                    return None
                sql += f" PARTITION ({spec})"
            return self._described_location(sql)
        except Exception as error:  # py4j and Spark errors alike: the metastore could not answer
            raise CatalogUnreadable(f"cannot read {database}.{table} from the Spark metastore: {error}") from error

    def relocate(self, moved: Callable[[str], str | None]) -> Relocated:
        """Point every database, table and partition whose location ``moved`` maps elsewhere (a
        ``file:`` URI, as the catalog stores it) at its new place: a workspace that was copied or moved."""
        catalog = self._external_catalog()
        tables = partitions = 0
        stuck: list[str] = []
        databases = catalog.listDatabases()
        for d in range(databases.size()):
            database = databases.apply(d)
            where = catalog.getDatabase(database).locationUri()
            target = moved(str(where))
            if target is not None:
                try:
                    self.session.sql(f"ALTER DATABASE {ddl_name(database)} SET LOCATION {string_literal(target)}")
                except Exception:
                    stuck.append(database)
            for table in _tables_of(catalog, database):
                where = table.storage().locationUri()
                target = moved(str(where.get())) if where.isDefined() else None
                name = ddl_name(database, table.identifier().table())
                if target is not None:
                    self.session.sql(f"ALTER TABLE {name} SET LOCATION {string_literal(target)}")
                    tables += 1
                if table.partitionColumnNames().nonEmpty():
                    partitions += self._partitions.relocate(database, table.identifier().table(), moved)
        self._schemas.clear()
        self._partitions.forget(None)
        return Relocated(tables, partitions, tuple(stuck))

    def catalog_locations(self) -> list[CatalogEntry]:
        """Every table and partition of the metastore with the location it points at (a ``file:`` URI)."""
        catalog = self._external_catalog()
        entries: list[CatalogEntry] = []
        databases = catalog.listDatabases()
        for d in range(databases.size()):
            database = databases.apply(d)
            for table in _tables_of(catalog, database):
                name = str(table.identifier().table())
                where = table.storage().locationUri()
                if where.isDefined():
                    entries.append(CatalogEntry(database, name, {}, normalize_location(str(where.get()))))
                columns = table.partitionColumnNames()
                order = [str(columns.apply(c)) for c in range(columns.size())]
                if order:
                    entries.extend(
                        CatalogEntry(database, name, {c: spec[c] for c in order if c in spec}, normalize_location(at))
                        for spec, at in self._partitions.locations(database, name)
                    )
        return entries

    def stop(self) -> None:
        if local_catalog() is self:
            set_local_catalog(None)
        self.session.stop()
