"""The local Athena's catalog: Glue (moto's) is the truth, Spark's metastore a copy made for each query.

Before a query, ``sync`` makes each table it names in Spark's metastore as Glue has it (columns, partition
keys, location, format read as its SerDe reads it, partitions), under ``<prefix><glue database>``, again only
when the Glue entry changed; a projected table's partitions are the template's folders in the mirror. After
it, ``write_back`` writes what the query changed in Spark (CTAS, CREATE, DROP, ALTER TABLE ... PARTITION, SET
LOCATION, INSERT's new partitions, CREATE / DROP DATABASE) back to Glue, so the deployed functions see it.
"""

from __future__ import annotations

import datetime
import gzip
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lakeline.engines.athena import glue_delimiter, glue_format, glue_quote
from lakeline.engines.base import DEFAULT_DATABASE
from lakeline.engines.serdes import JSON_SERDE, LAZY_SIMPLE
from lakeline.engines.spark import SparkEngine
from lakeline.engines.symlink import SYMLINK_INPUT_FORMAT, SymlinkTable, reader
from lakeline.names import ddl_name, string_literal
from lakeline.runtimes.deployed.local_aws.athena_answers import glue_definition
from lakeline.runtimes.deployed.local_aws.athena_mirror import visible_files
from lakeline.runtimes.deployed.local_aws.athena_statements import (
    ORC,
    PARQUET,
    S3_URI,
    TEXT_FORMATS,
    LocalAthenaError,
    Rewriter,
    Statement,
    bucket_of,
)

PARTITIONS_PER_STATEMENT = 100
# How many of a JSON table's files are sampled for the spelling of its keys (their first line each).
SPELLING_SAMPLE = 200


class CatalogSync:
    """Spark's metastore kept as Glue has the tables queries name (``engine``'s session; ``names``: Glue's
    names and ``s3://`` URIs as Spark's)."""

    def __init__(self, engine: SparkEngine, names: Rewriter) -> None:
        self.engine = engine
        self.names = names
        self._catalog: dict[tuple[str, str], str | None] = {}  # Glue fingerprint each Spark table was made from
        # The keys of a JSON table's files as written, by their lowercase name, where they differ from it: the
        # Spark table read with them (Spark's JSON reader matches keys as written; Athena's SerDes and Glue,
        # which lowercases struct fields, ignore case).
        self._spellings: dict[tuple[str, str], dict[str, str]] = {}

    def forget(self, keys: set[tuple[str, str]]) -> None:
        """Make these tables again from Glue before the next query that names them (their state is unknown)."""
        for key in keys:
            self._catalog.pop(key, None)

    def sync(self, glue: Any, statement: Statement) -> set[str]:
        """Make Spark's metastore hold each database and table the statement names as Glue has it; the
        buckets their locations are in."""
        buckets: set[str] = set()
        for database in sorted(statement.databases):
            spark_database = self.names.spark_database(database)
            # Athena's catalog always has ``default``; Glue gets it when a statement writes there.
            if database in glue.databases or database == DEFAULT_DATABASE:
                self.engine.session.sql(f"CREATE DATABASE IF NOT EXISTS {ddl_name(spark_database)}")
                continue
            if self.engine.session.catalog.databaseExists(spark_database):
                self.engine.execute(f"DROP DATABASE IF EXISTS {ddl_name(spark_database)} CASCADE")
                for key in [key for key in self._catalog if key[0] == database]:
                    del self._catalog[key]
            if database not in {statement.creates_database, statement.drops_database}:
                # Checked here: the engine writes a CTAS's files before it registers the table.
                raise LocalAthenaError(f"SCHEMA_NOT_FOUND: Schema '{database}' does not exist")
        for database, table in sorted(statement.tables):
            found = glue.databases.get(database)
            entry = found.tables.get(table) if found is not None else None
            fingerprint = _fingerprint(entry)
            if entry is not None:
                buckets |= table_buckets(entry)
            key = (database, table)
            if key in self._catalog and self._catalog[key] == fingerprint:
                continue
            self._rebuild(database, table, entry)
            self._catalog[key] = fingerprint
        return buckets

    def respell(self, glue: Any, statement: Statement) -> None:
        """Each JSON table the statement reads made again in Spark if its files (in the mirror, after the pull)
        spell keys otherwise than it was made with, so that ``recordedAt`` in a file is Glue's ``recordedat``
        as Athena reads it. A table the statement writes is made with Glue's names, as before."""
        for database, table in sorted(statement.tables):
            found = glue.databases.get(database)
            entry = found.tables.get(table) if found is not None else None
            key = (database, table)
            if entry is None or glue_format(glue_definition(entry).get("StorageDescriptor", {})) != "json":
                continue
            spellings: dict[str, str] = {}
            if (database, table) not in statement.changes:
                location = str(glue_definition(entry).get("StorageDescriptor", {}).get("Location", ""))
                spellings = json_spellings(Path(self.names.local_uri(location).removeprefix("file://")))
            if spellings != self._spellings.get(key, {}):
                self._spellings[key] = spellings
                self._rebuild(database, table, entry)

    def project_partitions(self, glue: Any, statement: Statement) -> None:
        """The partitions of each projected table the statement reads, found in the mirror (Glue holds none)."""
        for database, table in sorted(statement.tables - statement.changes):
            found = glue.databases.get(database)
            entry = found.tables.get(table) if found is not None else None
            if entry is None:
                continue
            parameters = glue_definition(entry).get("Parameters", {})
            if str(parameters.get("projection.enabled", "")).lower() != "true":
                continue
            specs = [
                f"PARTITION ({ddl_name(key)} = {string_literal(value)}) "
                f"LOCATION {string_literal(self.names.local_uri(uri))}"
                for key, value, uri in self._projected(f"{database}.{table}", parameters)
            ]
            name = ddl_name(self.names.spark_database(database), table)
            for start in range(0, len(specs), PARTITIONS_PER_STATEMENT):
                self.engine.session.sql(
                    f"ALTER TABLE {name} ADD IF NOT EXISTS {' '.join(specs[start : start + PARTITIONS_PER_STATEMENT])}"
                )
            if specs:
                self.engine.session.catalog.refreshTable(name)

    def _projected(self, name: str, parameters: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
        """(key, value, s3:// location) of each folder of a ``date`` projection's template in the mirror."""
        keys = {key.split(".")[1] for key in parameters if key.startswith("projection.") and key.count(".") >= 2}
        template = str(parameters.get("storage.location.template", ""))
        if len(keys) != 1 or not template:
            raise LocalAthenaError(
                f"table {name}: only one date projection with a location template is supported locally"
            )
        (key,) = keys
        kind = parameters.get(f"projection.{key}.type")
        date_format = str(parameters.get(f"projection.{key}.format", ""))
        if kind != "date" or date_format != "yyyy-MM-dd":
            raise LocalAthenaError(
                f"table {name}: projection {key} of type {kind} ({date_format}) is not supported locally"
            )
        bounds = [bound.strip() for bound in str(parameters.get(f"projection.{key}.range", "")).split(",")]
        today = datetime.datetime.now(datetime.UTC).date().isoformat()
        ends = [today if bound.upper() == "NOW" else bound for bound in bounds]
        if len(ends) != 2 or not all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", end) for end in ends):
            raise LocalAthenaError(
                f"table {name}: projection range {bounds} is not supported locally (two yyyy-MM-dd dates or NOW)"
            )
        first, last = ends
        placeholder = "${" + key + "}"
        found = S3_URI.match(template)
        if found is None or placeholder not in template:
            raise LocalAthenaError(f"table {name}: storage.location.template {template!r} is not an s3:// template")
        before, after = template.split(placeholder, 1)
        if after.strip("/"):
            raise LocalAthenaError(f"table {name}: {template!r}: only a template ending in its folder is supported")
        parent_uri, _, stem = before.rpartition("/")
        parent = Path(self.names.local_uri(parent_uri + "/").removeprefix("file://"))
        for folder in sorted(parent.glob(f"{stem}*")) if parent.is_dir() else []:
            value = folder.name.removeprefix(stem)
            if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) and first <= value <= last and any(visible_files(folder)):
                yield key, value, f"{before}{value}/"

    def define(self, glue: Any, statement: Statement, table_input: dict[str, Any]) -> None:
        """The table of a ``CREATE TABLE`` in Glue, as Athena registers it."""
        ((database, table),) = statement.changes
        if database not in glue.databases:  # ``default``: Athena's catalog always has it
            glue.create_database(database, {"Name": database})
        if table in glue.databases[database].tables:
            if statement.if_not_exists:
                return
            raise LocalAthenaError(f"AlreadyExistsException: Table {database}.{table} already exists")
        glue.create_table(database, table, table_input)
        self._catalog.pop((database, table), None)

    def _rebuild(self, database: str, table: str, entry: Any) -> None:
        """The Spark table made anew from the Glue table ``entry`` (dropped if ``entry`` is None)."""
        spark_database = self.names.spark_database(database)
        name = ddl_name(spark_database, table)
        if not self.engine.session.catalog.databaseExists(spark_database):
            return
        if self.engine.table_exists(spark_database, table):
            # Through the engine, which forgets what it remembered of the table (partitions, schema).
            self.engine.execute(f"DROP TABLE IF EXISTS {name}")
        if entry is None:
            return
        definition = glue_definition(entry)
        descriptor = definition.get("StorageDescriptor", {})
        columns = [*descriptor.get("Columns", []), *definition.get("PartitionKeys", [])]
        spelled = self._spellings.get((database, table), {})
        names = [spelled.get(c["Name"].lower(), c["Name"].lower()) for c in columns]
        kinds = [respelled(c.get("Type", "string"), spelled) for c in columns]
        listed = ", ".join(f"{ddl_name(name)} {kind}" for name, kind in zip(names, kinds, strict=True))
        if descriptor.get("InputFormat") == SYMLINK_INPUT_FORMAT:
            # Athena reads the files its manifests list with its SerDe; so does the engine (engines.symlink).
            serde = descriptor.get("SerdeInfo", {})
            source, options = reader(
                str(serde.get("SerializationLibrary", "")),
                serde.get("Parameters", {}),
                definition.get("Parameters", {}),
            )
            where = self.names.local_uri(str(descriptor.get("Location", "")))
            self.engine.define_symlink(f"{spark_database}.{table}", SymlinkTable(listed, source, where, options))
            return
        keys = [c["Name"].lower() for c in definition.get("PartitionKeys", [])]
        using = self._using(f"{database}.{table}", definition)
        if not keys:
            # Athena reads an unpartitioned table's folder and its subfolders, all as data. Spark would
            # infer a partition column from a subfolder named k=v (stage A publishes at <root>/lakeline_run=
            # <token>/) and keep it in the table's schema, which was then written back to Glue (#36).
            using = _with_option(using, "recursiveFileLookup", "true")
        partitioned = f" PARTITIONED BY ({', '.join(ddl_name(k) for k in keys)})" if keys else ""
        location = descriptor.get("Location")
        placed = f" LOCATION {string_literal(self.names.local_uri(location))}" if location else ""
        self.engine.session.sql(f"CREATE TABLE {name} ({listed}) {using}{partitioned}{placed}")
        specs = []
        for partition in list(entry.partitions.values()):
            values = partition.partition_input.get("Values", [])
            where = partition.partition_input.get("StorageDescriptor", {}).get("Location")
            spec = ", ".join(f"{ddl_name(k)} = {string_literal(str(v))}" for k, v in zip(keys, values, strict=False))
            specs.append(
                f"PARTITION ({spec})" + (f" LOCATION {string_literal(self.names.local_uri(where))}" if where else "")
            )
        for start in range(0, len(specs), PARTITIONS_PER_STATEMENT):
            chunk = " ".join(specs[start : start + PARTITIONS_PER_STATEMENT])
            self.engine.session.sql(f"ALTER TABLE {name} ADD IF NOT EXISTS {chunk}")

    @staticmethod
    def _using(name: str, definition: dict[str, Any]) -> str:
        """The Spark data source that reads the Glue table's files as its SerDe does."""
        descriptor = definition.get("StorageDescriptor", {})
        serde = descriptor.get("SerdeInfo", {})
        library = str(serde.get("SerializationLibrary", ""))
        kind = glue_format(descriptor) or ("csv" if not library and not descriptor.get("InputFormat") else None)
        if kind in {"parquet", "orc"}:
            return f"USING {kind}"
        if kind == "json":
            parameters = serde.get("Parameters", {})
            renamed = sorted(key for key in parameters if key.startswith("mapping."))
            if renamed:
                raise LocalAthenaError(f"table {name}: SerDe properties {renamed} are not supported locally")
            # Both JSON SerDes fail a query on a line they cannot read (HIVE_CURSOR_ERROR), unless OpenX's
            # ignore.malformed.json makes such a line a row of NULLs, as Spark's PERMISSIVE mode does.
            ignored = str(parameters.get("ignore.malformed.json", "false")).lower() == "true"
            return f"USING json OPTIONS (mode '{'PERMISSIVE' if ignored else 'FAILFAST'}')"
        if kind != "csv":
            raise LocalAthenaError(
                f"table {name}: SerDe {library or descriptor.get('InputFormat')} is not supported locally"
            )
        parameters = serde.get("Parameters", {})
        lazy = not library or "lazysimpleserde" in library.lower()
        options = {"sep": glue_delimiter(descriptor) or ("\u0001" if lazy else ",")}
        quote = glue_quote(descriptor)
        options["quote"] = quote
        escape = parameters.get("escapeChar") or parameters.get("escape.delim")
        if escape:
            options["escape"] = str(escape)
        skip = str(definition.get("Parameters", {}).get("skip.header.line.count", "0"))
        if skip not in {"0", "1"}:
            raise LocalAthenaError(f"table {name}: skip.header.line.count {skip} is not supported locally (0 or 1)")
        options["header"] = "true" if skip == "1" else "false"
        if not lazy:
            # OpenCSVSerde reads every field as a string and casts it to the column's type: a field that
            # does not parse fails the query (HIVE_BAD_DATA), where LazySimpleSerDe reads it as NULL.
            options["mode"] = "FAILFAST"
        listed = ", ".join(f"{key} {string_literal(value)}" for key, value in options.items())
        return f"USING csv OPTIONS ({listed})"

    def write_back(self, glue: Any, statement: Statement, *, succeeded: bool) -> set[str]:
        """Glue made to hold what the statement changed in Spark; the buckets of the tables it changed."""
        buckets: set[str] = set()
        if not succeeded:
            for key in statement.changes:
                self._catalog.pop(key, None)  # made again from Glue before the next query that names it
            return buckets
        if statement.creates_database and statement.creates_database not in glue.databases:
            glue.create_database(statement.creates_database, {"Name": statement.creates_database})
        if statement.drops_database and statement.drops_database in glue.databases:
            glue.delete_database(statement.drops_database)
        for database, table in sorted(statement.changes):
            spark_database = self.names.spark_database(database)
            entry = glue.databases[database].tables.get(table) if database in glue.databases else None
            if not self.engine.table_exists(spark_database, table):
                if entry is not None:
                    glue.delete_table(database, table)
                self._catalog[(database, table)] = None
                continue
            if not self._external_catalog().tableExists(spark_database, table):
                self.engine.describe_table(spark_database, table)  # registers a CTAS the engine only wrote
            table_input, partitions = self._spark_table(spark_database, table, statement.locations)
            if entry is None:
                if database not in glue.databases:
                    glue.create_database(database, {"Name": database})
                glue.create_table(database, table, table_input)
                entry = glue.get_table(database, table)
            else:
                current = glue_definition(entry)
                merged = _merged(current, table_input)
                if merged != current:
                    glue.update_table(database, table, merged)
            self._write_partitions(glue, database, table, entry, table_input, partitions)
            buckets |= table_buckets(entry)
            self._catalog[(database, table)] = _fingerprint(entry)
        return buckets

    def _write_partitions(
        self,
        glue: Any,
        database: str,
        table: str,
        entry: Any,
        table_input: dict[str, Any],
        partitions: dict[tuple[str, ...], str | None],
    ) -> None:
        present = {tuple(p.partition_input.get("Values", [])): p for p in list(entry.partitions.values())}
        descriptor = {k: v for k, v in table_input["StorageDescriptor"].items() if k != "Location"}
        created, updated = [], []
        for values, location in partitions.items():
            found = present.get(values)
            part_input = {
                "Values": list(values),
                "StorageDescriptor": {**descriptor, **({"Location": location} if location else {})},
            }
            if found is None:
                created.append(part_input)
            elif str(found.partition_input.get("StorageDescriptor", {}).get("Location", "")).rstrip("/") != str(
                location or ""
            ).rstrip("/"):
                kept = dict(found.partition_input)
                kept["StorageDescriptor"] = {**kept.get("StorageDescriptor", {}), "Location": location}
                updated.append({"PartitionValueList": list(values), "PartitionInput": kept})
        deleted = [{"Values": list(values)} for values in present if values not in partitions]
        if created:
            glue.batch_create_partition(database, table, created)
        if updated:
            glue.batch_update_partition(database, table, updated)
        if deleted:
            glue.batch_delete_partition(database, table, deleted)

    def _spark_table(
        self, spark_database: str, table: str, named: list[str]
    ) -> tuple[dict[str, Any], dict[tuple[str, ...], str | None]]:
        """The Spark table as a Glue ``TableInput``, and its partitions: values → location (s3://, as
        the statement wrote it when it named it: Spark drops a trailing slash)."""

        def s3_location(option: Any) -> str | None:
            if not option.isDefined():
                return None
            location = self.names.s3_text(option.get().toString())
            return next((uri for uri in named if uri.rstrip("/") == location.rstrip("/")), location)

        session = self.engine.session
        jvm: Any = session.sparkContext._jvm
        catalog = self._external_catalog()
        found = catalog.getTable(spark_database, table)
        convert = jvm.scala.jdk.javaapi.CollectionConverters
        to_json = jvm.com.fasterxml.jackson.databind.ObjectMapper()

        def python(scala: Any) -> Any:
            # One call for a whole Scala collection: iterating one through py4j costs a call per element,
            # and its end an exception that pyspark converts (most of this method's time before).
            return json.loads(to_json.writeValueAsString(convert.asJava(scala)))

        keys = python(found.partitionColumnNames())
        columns: list[dict[str, str]] = []
        partition_keys: list[dict[str, str]] = []
        for spark_field in found.schema().fields():
            column = {"Name": spark_field.name(), "Type": spark_field.dataType().catalogString()}
            (partition_keys if spark_field.name() in keys else columns).append(column)
        storage = found.storage()
        location = s3_location(storage.locationUri())
        provider = str(found.provider().get()).lower() if found.provider().isDefined() else "hive"
        properties = python(storage.properties())
        descriptor: dict[str, Any] = {"Columns": columns, "Compressed": False}
        if location:
            descriptor["Location"] = location
        parameters = {"EXTERNAL": "TRUE"}
        if provider == "parquet":
            descriptor.update(json.loads(json.dumps(PARQUET)))
            parameters["classification"] = "parquet"
            if properties.get("compression"):
                parameters["parquet.compression"] = str(properties["compression"]).upper()
        elif provider == "orc":
            descriptor.update(json.loads(json.dumps(ORC)))
            parameters["classification"] = "orc"
        elif provider == "json":
            descriptor.update({**TEXT_FORMATS, "SerdeInfo": {"SerializationLibrary": JSON_SERDE, "Parameters": {}}})
            parameters["classification"] = "json"
        elif provider == "csv":
            delimiter = str(properties.get("sep", properties.get("delimiter", ",")))
            serde = {"SerializationLibrary": LAZY_SIMPLE, "Parameters": {"field.delim": delimiter}}
            descriptor.update({**TEXT_FORMATS, "SerdeInfo": serde})
            parameters["classification"] = "csv"
            if str(properties.get("header", "false")).lower() == "true":
                parameters["skip.header.line.count"] = "1"
        else:
            option = storage.serde()
            descriptor.update(
                {
                    "InputFormat": str(storage.inputFormat().get()) if storage.inputFormat().isDefined() else "",
                    "OutputFormat": str(storage.outputFormat().get()) if storage.outputFormat().isDefined() else "",
                    "SerdeInfo": {
                        "SerializationLibrary": str(option.get()) if option.isDefined() else LAZY_SIMPLE,
                        "Parameters": {str(k): str(v) for k, v in properties.items()},
                    },
                }
            )
            table_properties = python(found.properties())
            parameters.update({str(k): str(v) for k, v in table_properties.items() if not str(k).startswith("spark.")})
        bucketing = found.bucketSpec()
        if bucketing.isDefined():
            descriptor["NumberOfBuckets"] = int(bucketing.get().numBuckets())
            descriptor["BucketColumns"] = [str(c) for c in python(bucketing.get().bucketColumnNames())]
        table_input = {
            "Name": table,
            "TableType": "EXTERNAL_TABLE",
            "Parameters": parameters,
            "PartitionKeys": partition_keys,
            "StorageDescriptor": descriptor,
        }
        partitions: dict[tuple[str, ...], str | None] = {}
        if keys:
            for partition in convert.asJava(catalog.listPartitions(spark_database, table, jvm.scala.Option.empty())):
                spec = python(partition.spec())
                partitions[tuple(str(spec[key]) for key in keys)] = s3_location(partition.storage().locationUri())
        return table_input, partitions

    def _external_catalog(self) -> Any:
        return self.engine.session._jsparkSession.sharedState().externalCatalog()


def listed_buckets(glue: Any, s3: Any, statement: Statement) -> set[str]:
    """The buckets of the files the manifests of the symlink tables ``statement`` names list (mirrored
    before it runs, as those of the tables' own locations are)."""
    buckets: set[str] = set()
    for database, table in statement.tables:
        found = glue.databases.get(database)
        entry = found.tables.get(table) if found is not None else None
        descriptor = glue_definition(entry).get("StorageDescriptor", {}) if entry is not None else {}
        where = S3_URI.match(str(descriptor.get("Location", "")))
        if descriptor.get("InputFormat") != SYMLINK_INPUT_FORMAT or where is None:
            continue
        objects = s3.buckets.get(where.group("bucket"))
        for key, item in list(objects.keys.items()) if objects is not None else []:
            if key.startswith(where.group("key")) and not key.endswith("/"):
                listed = (bucket_of(line.strip()) for line in item.value.decode().splitlines())
                buckets |= {bucket for bucket in listed if bucket}
    return buckets


def table_buckets(entry: Any) -> set[str]:
    definition = glue_definition(entry)
    locations = [definition.get("StorageDescriptor", {}).get("Location")]
    locations += [
        p.partition_input.get("StorageDescriptor", {}).get("Location") for p in list(entry.partitions.values())
    ]
    return {bucket for bucket in (bucket_of(location) for location in locations) if bucket}


def json_spellings(root: Path) -> dict[str, str]:
    """The keys of the JSON objects in the first line of (some of) the files under ``root`` that are not
    lowercase, by their lowercase name."""
    found: dict[str, str] = {}

    def visit(value: Any) -> None:
        if isinstance(value, dict):
            for name, inner in value.items():
                if name != name.lower():
                    found.setdefault(name.lower(), name)
                visit(inner)
        elif isinstance(value, list):
            for inner in value:
                visit(inner)

    for count, path in enumerate(visible_files(root)):
        if count >= SPELLING_SAMPLE:
            break
        try:
            with gzip.open(path, "rt") if path.name.endswith(".gz") else path.open() as lines:
                visit(json.loads(lines.readline() or "null"))
        except (OSError, ValueError, EOFError):
            continue  # not a JSON line: the query reads (or refuses) it as before
    return found


def respelled(kind: str, spellings: dict[str, str]) -> str:
    """A Hive type with its struct fields named as ``spellings`` spell them (``struct<recordedat:bigint>``
    → ``struct<recordedAt:bigint>``)."""
    if not spellings:
        return kind
    return re.sub(r"(?<=[<,])\s*(\w+)\s*:", lambda m: f"{spellings.get(m.group(1).lower(), m.group(1))}:", kind)


def _fingerprint(entry: Any) -> str | None:
    """What a Glue table is, as one hash: its current definition and its partitions."""
    if entry is None:
        return None
    definition = glue_definition(entry)
    partitions = [p.partition_input for p in list(entry.partitions.values())]
    text = json.dumps([definition, partitions], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _merged(current: dict[str, Any], spark: dict[str, Any]) -> dict[str, Any]:
    """The Glue table input with what a statement can change in Spark taken from Spark: columns,
    partition keys, location. Its format, parameters and the rest stay as Glue has them."""
    merged: dict[str, Any] = json.loads(json.dumps(current, default=str))
    descriptor = merged.setdefault("StorageDescriptor", {})
    spark_descriptor = spark["StorageDescriptor"]
    if [c["Name"].lower() for c in descriptor.get("Columns", [])] != [c["Name"] for c in spark_descriptor["Columns"]]:
        descriptor["Columns"] = spark_descriptor["Columns"]
    if [c["Name"].lower() for c in merged.get("PartitionKeys", [])] != [c["Name"] for c in spark["PartitionKeys"]]:
        merged["PartitionKeys"] = spark["PartitionKeys"]
    if spark_descriptor.get("Location") and str(descriptor.get("Location", "")).rstrip("/") != spark_descriptor[
        "Location"
    ].rstrip("/"):
        descriptor["Location"] = spark_descriptor["Location"]
    return merged


def _with_option(using: str, key: str, value: str) -> str:
    """``USING <source> [OPTIONS (...)]`` with one option more."""
    option = f"{key} {string_literal(value)}"
    if using.endswith(")") and " OPTIONS (" in using:
        return f"{using[:-1]}, {option})"
    return f"{using} OPTIONS ({option})"
