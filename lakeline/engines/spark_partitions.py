"""The two partition statements every stage run issues, done through Spark's catalog API.

``ALTER TABLE ... ADD IF NOT EXISTS PARTITION (...) LOCATION ...`` and ``ALTER TABLE ... PARTITION (...)
SET LOCATION ...`` as SQL each end in a table refresh that costs more than the metastore write itself
(on embedded Derby: ~0.3 s for an ADD, against ~0.15 s for the write). Nothing needs the refresh: the
engine caches no data, and lists a partition's files on every query. The same writes through the
external catalog cost one round trip each, and the partition a run has just added or moved is kept, so
the next move of it needs no read first (a kept partition another writer dropped fails the move, which
then reads it again). A SET LOCATION right after the ADD that put the partition there is not sent at
all: stage runs issue both, not knowing whether the partition exists.

Only the plain case takes the short way: one partition, a qualified table, every partition column a
string (not CHAR or VARCHAR) named exactly as the catalog names it, plain literals. Anything else
(``False``) runs as SQL, which also gives Spark's own error for a statement that cannot succeed.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ADDS_LOCATED_PARTITION = re.compile(
    r"^\s*ALTER\s+TABLE\s+`(?P<database>[^`]+)`\.`(?P<table>[^`]+)`\s+ADD\s+IF\s+NOT\s+EXISTS\s+"
    r"PARTITION\s*\((?P<spec>[^()]*)\)\s+LOCATION\s+'(?P<location>[^'\\]+)'\s*$",
    re.IGNORECASE,
)
SETS_PARTITION_LOCATION = re.compile(
    r"^\s*ALTER\s+TABLE\s+`(?P<database>[^`]+)`\.`(?P<table>[^`]+)`\s+PARTITION\s*\((?P<spec>[^()]*)\)"
    r"\s+SET\s+LOCATION\s+'(?P<location>[^'\\]+)'\s*$",
    re.IGNORECASE,
)
SPEC_ITEM = re.compile(r"\s*`(?P<column>[^`]+)`\s*=\s*'(?P<value>[^'\\]+)'\s*(?:,|$)")
ALREADY_EXISTS = re.compile(r"PARTITIONS_ALREADY_EXIST|PartitionsAlreadyExistException|AlreadyExistsException")
SPEC = re.compile(f"(?:{SPEC_ITEM.pattern})+")
Spec = tuple[tuple[str, str], ...]


def _catalog_errors() -> tuple[type[Exception], ...]:
    """What a failed catalog call raises: PySpark converts some Java exceptions, not all."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (Py4JError, PySparkException)


@dataclass(frozen=True)
class KnownPartition:
    """A partition as this engine last read or wrote it: the catalog object, where it points (empty if
    not known), and the number of the statement that added it (``None``: not added by this engine)."""

    partition: Any  # CatalogTablePartition, or None: not read yet
    location: str = ""
    added_by: int | None = None


@dataclass(frozen=True)
class KnownTable:
    """A table's catalog object, and its partition columns if every one is a string (else empty)."""

    table: Any  # CatalogTable
    string_columns: frozenset[str]


class PartitionStatements:
    """Runs the plain ADD and SET LOCATION of one partition through the external catalog."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self._tables: dict[str, KnownTable] = {}  # by "db.table"
        self._known: dict[tuple[str, Spec], KnownPartition] = {}
        self._statement = 0
        self._catalog: Any = None

    def next_statement(self) -> None:
        """Count a statement the engine runs (by whatever way): only the statement right after an ADD
        may take the partition's location as that ADD left it."""
        self._statement += 1

    def forget(self, table: str | None) -> None:
        """Forget what is known of ``table`` ("db.table", lowercase), or of every table (``None``, or a
        name without its database, which depends on the current one)."""
        if table is None or "." not in table:
            self._tables.clear()
            self._known.clear()
            return
        self._tables.pop(table, None)
        for key in [key for key in self._known if key[0] == table]:
            del self._known[key]

    def run(self, spark_sql: str) -> bool:
        """Run ``spark_sql`` if it is a plain ADD or SET LOCATION of one partition; ``False`` otherwise."""
        adds = ADDS_LOCATED_PARTITION.match(spark_sql)
        found = adds or SETS_PARTITION_LOCATION.match(spark_sql)
        if found is None:
            return False
        database, table = found.group("database", "table")
        table_key = f"{database}.{table}".lower()
        if not SPEC.fullmatch(found.group("spec")):
            return False
        spec = tuple((item.group("column"), item.group("value")) for item in SPEC_ITEM.finditer(found.group("spec")))
        location = found.group("location")
        try:
            if not self._plain_spec(database, table, table_key, spec):
                return False
            if adds:
                return self._add(database, table, table_key, spec, location)
            return self._set_location(database, table, table_key, spec, location)
        except _catalog_errors():  # another catalog, or a partition stored differently: Spark's command says why
            self.forget(table_key)
            return False

    def _external(self) -> Any:
        if self._catalog is None:
            self._catalog = self._session._jsparkSession.sharedState().externalCatalog()
        return self._catalog

    def _jvm(self) -> Any:
        return self._session.sparkContext._jvm

    def _plain_spec(self, database: str, table: str, table_key: str, spec: Spec) -> bool:
        """The spec names every partition column exactly once, each a string: stored as written."""
        if table_key not in self._tables:
            catalog_table = self._external().getTable(database, table)
            # CHAR/VARCHAR columns are strings with a note in their metadata: Spark pads or checks their
            # values, so they go through SQL.
            fields = {
                field.name(): "char/varchar"
                if field.metadata().contains("__CHAR_VARCHAR_TYPE_STRING")
                else field.dataType().typeName()
                for field in catalog_table.partitionSchema().fields()
            }
            strings = all(kind == "string" for kind in fields.values())
            self._tables[table_key] = KnownTable(catalog_table, frozenset(fields) if strings else frozenset())
        names = [column for column, _ in spec]
        return bool(names) and len(set(names)) == len(names) and set(names) == self._tables[table_key].string_columns

    def locations(self, database: str, table: str) -> list[tuple[dict[str, str], str]]:
        """Every partition of ``table``: its spec and its location as the catalog stores it."""
        listed = self._external().listPartitions(database, table, self._jvm().scala.Option.empty())
        found = []
        for index in range(listed.size()):
            partition = listed.apply(index)
            where = partition.storage().locationUri()
            if where.isDefined():
                spec = partition.spec()
                keys = spec.keys().toList()
                found.append(
                    ({str(keys.apply(k)): str(spec.apply(keys.apply(k))) for k in range(keys.size())}, str(where.get()))
                )
        return found

    def relocate(self, database: str, table: str, moved: Callable[[str], str | None]) -> int:
        """Point every partition of ``table`` whose location ``moved`` maps elsewhere at its new place,
        in one catalog write; the number of partitions moved."""
        listed = self._external().listPartitions(database, table, self._jvm().scala.Option.empty())
        changed = []
        for index in range(listed.size()):
            partition = listed.apply(index)
            where = partition.storage().locationUri()
            target = moved(str(where.get())) if where.isDefined() else None
            if target is not None:
                changed.append(
                    partition.copy(
                        partition.spec(),
                        self._storage_at(partition.storage(), target),
                        partition.parameters(),
                        partition.createTime(),
                        partition.lastAccessTime(),
                        partition.stats(),
                    )
                )
        if changed:
            self._external().alterPartitions(database, table, self._jvm().PythonUtils.toSeq(changed))
        self.forget(f"{database}.{table}".lower())
        return len(changed)

    def _storage_at(self, storage: Any, location: str) -> Any:
        """``storage`` with its location replaced."""
        from py4j.protocol import Py4JError

        jvm = self._jvm()
        uri = jvm.scala.Option.apply(jvm.org.apache.hadoop.fs.Path(location).toUri())
        # CatalogStorageFormat's copy takes one field more on Spark 4 (serdeName) than on 3.5 (Glue).
        fields = [uri, storage.inputFormat(), storage.outputFormat(), storage.serde(), storage.compressed()]
        fields.append(storage.properties())
        with contextlib.suppress(Py4JError):  # Spark 3.5 has no such field
            fields.append(storage.serdeName())
        return storage.copy(*fields)

    def _add(self, database: str, table: str, table_key: str, spec: Spec, location: str) -> bool:
        """As Spark's ADD IF NOT EXISTS: a partition already there is left as it is."""
        key = (table_key, spec)
        if key in self._known:
            return True
        jvm = self._jvm()
        spec_map = jvm.PythonUtils.toScalaMap(dict(spec))
        storage = self._storage_at(self._tables[table_key].table.storage(), location)
        partition = jvm.org.apache.spark.sql.catalyst.catalog.CatalogTablePartition(
            spec_map, storage, jvm.PythonUtils.toScalaMap({}), int(time.time() * 1000), -1, jvm.scala.Option.empty()
        )
        try:
            # Not ignoreIfExists: the engine must know whether this statement put the partition there.
            self._external().createPartitions(database, table, jvm.PythonUtils.toSeq([partition]), False)
        except _catalog_errors() as error:
            if not ALREADY_EXISTS.search(str(error)):
                raise
            self._known[key] = KnownPartition(None)  # there already, left as it is; read when it is moved
            return True
        self._known[key] = KnownPartition(partition, location, added_by=self._statement)
        return True

    def _set_location(self, database: str, table: str, table_key: str, spec: Spec, location: str) -> bool:
        key = (table_key, spec)
        known = self._known.get(key)
        if known is not None and known.added_by == self._statement - 1 and known.location == location:
            return True  # the ADD just before put it there
        if known is not None and known.partition is not None:
            try:
                self._move(database, table, key, known.partition, location)
                return True
            except _catalog_errors():
                pass  # the kept partition was dropped or changed elsewhere: read it again
        jvm = self._jvm()
        self._move(
            database,
            table,
            key,
            self._external().getPartition(database, table, jvm.PythonUtils.toScalaMap(dict(spec))),
            location,
        )
        return True

    def _move(self, database: str, table: str, key: tuple[str, Spec], partition: Any, location: str) -> None:
        moved = partition.copy(
            partition.spec(),
            self._storage_at(partition.storage(), location),
            partition.parameters(),
            partition.createTime(),
            partition.lastAccessTime(),
            partition.stats(),
        )
        self._external().alterPartitions(database, table, self._jvm().PythonUtils.toSeq([moved]))
        self._known[key] = KnownPartition(moved, location)
