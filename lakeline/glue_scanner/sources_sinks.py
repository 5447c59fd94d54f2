"""Where a Glue script reads and writes: datasets named from catalog tables, paths and connection
options, and each write recorded with its column lineage. A layer of the script interpreter
(``script``) that holds the analysis being built; the Glue and Spark layers above it read and write
through it."""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

from lakeline.engines.base import DEFAULT_DATABASE, TableSchema
from lakeline.glue_scanner import frames as fr
from lakeline.glue_scanner.catalog import canonical_location
from lakeline.glue_scanner.column_exprs import Problem, Site
from lakeline.glue_scanner.connections import Endpoints
from lakeline.glue_scanner.datasets import NamingError
from lakeline.glue_scanner.frames import Frame, merge_problems, opaque_frame
from lakeline.glue_scanner.script_analysis import ScriptAnalysis, ScriptContext, Write
from lakeline.glue_scanner.spark_columns import SparkColumns
from lakeline.glue_scanner.values import Const, Dict, FrameValue, Unknown, Value, const_str, flatten, literal
from lakeline.lineage.columns.model import OutputColumn

_NAMING_OPTIONS = frozenset(
    {
        "dbtable",
        "dbTable",
        "url",
        "database",
        "connectionName",
        "topicName",
        "streamName",
        "streamARN",
        "dynamodb.input.tableName",
        "dynamodb.output.tableName",
        "sfDatabase",
        "sfSchema",
    }
)
"""Options that decide which dataset is read or written: left unresolved, they are reported."""


class SourcesAndSinks(SparkColumns):
    """The interpreter's state (its context, catalog, views and the analysis) and the datasets read and written."""

    def __init__(self, context: ScriptContext) -> None:
        super().__init__(context.modules, context.libraries)
        self.context = context
        self.catalog = context.catalog
        self.endpoints = Endpoints(context.catalog, context.region, context.account)
        self.analysis = ScriptAnalysis()
        self.views: dict[str, Frame] = {}

    # Sources and sinks -------------------------------------------------------------------------

    def catalog_source(self, database: Value | None, table: Value | None, node: ast.AST, *, dynamic: bool) -> Frame:
        site = self.site(node)
        database_name, table_name = const_str(database), const_str(table)
        if database_name is None or table_name is None:
            reason = next((v.problem.message for v in (database, table) if isinstance(v, Unknown)), "")
            message = "catalog table name is not resolved" + (f": {reason}" if reason else "")
            return opaque_frame(site.problem(message), dynamic=dynamic)
        dataset, schema, problems = self.catalog_dataset(database_name, table_name, site)
        self.analysis.reads.add(dataset)
        return fr.source_frame(dataset, schema, dynamic=dynamic).with_problems(problems)

    def catalog_dataset(self, database: str, table: str, site: Site) -> tuple[str, TableSchema | None, list[Problem]]:
        """A catalog table's dataset: the table, or where it is stored when that is not S3."""
        real = self.catalog.resolve_link(database, table)
        schema = self.catalog.schema_or_none(*real)
        try:
            stored = self.endpoints.table_storage(*real)
        except NamingError as error:
            return f"{real[0]}.{real[1]}", schema, [site.problem(f"{real[0]}.{real[1]}: {error}")]
        if stored is None:
            return f"{real[0]}.{real[1]}", schema, []
        if schema is not None:
            self.analysis.schemas[stored] = schema
        return stored, schema, []

    def table_source(self, name_value: Value | None, node: ast.AST) -> Frame:
        name = const_str(name_value)
        if name is not None and "." not in name and name.lower() in self.views:
            return self.views[name.lower()]
        database, table = self.split_table_name(name_value)
        return self.catalog_source(database, table, node, dynamic=False)

    def split_table_name(self, value: Value | None) -> tuple[Value | None, Value | None]:
        name = const_str(value)
        if name is None:
            return value, value
        parts = [part.strip("`") for part in name.split(".")]
        if len(parts) == 1:
            return Const(DEFAULT_DATABASE), Const(parts[0])
        return Const(parts[-2]), Const(parts[-1])

    def path_dataset(self, path: str) -> tuple[str, TableSchema | None]:
        table = self.catalog.table_at(path)
        if table is not None:
            return f"{table[0]}.{table[1]}", self.catalog.schema_or_none(*table)
        return canonical_location(path), None

    def path_sources(self, paths: Sequence[Value], node: ast.AST, *, dynamic: bool) -> Frame:
        site = self.site(node)
        texts = [const_str(p) for p in paths]
        if not texts or any(t is None for t in texts):
            reason = next((p.problem.message for p in paths if isinstance(p, Unknown)), "")
            return opaque_frame(
                site.problem("source path is not resolved" + (f": {reason}" if reason else "")), dynamic=dynamic
            )
        sources = [self.path_dataset(t) for t in texts if t is not None]
        self.analysis.reads.update(dataset for dataset, _ in sources)
        return fr.sources_frame(sources, dynamic=dynamic)

    def options_source(self, bound: dict[str, Value], node: ast.AST, *, dynamic: bool) -> Frame:
        connection = const_str(bound.get("connection_type"))
        options = bound.get("connection_options")
        if connection == "s3" and isinstance(options, Dict):
            paths = options.get("paths") or options.get("path")
            if paths is not None:
                return self.path_sources(flatten([paths]), node, dynamic=dynamic)
        site = self.site(node)
        if connection is None:
            return opaque_frame(
                site.problem(f"the connection type is not resolved{self.reason(bound.get('connection_type'))}"),
                dynamic=dynamic,
            )
        strings, problems = self.option_strings(options, node)
        try:
            dataset = self.endpoints.options_dataset(connection, strings)
        except NamingError as error:
            return opaque_frame(site.problem(f"{connection} source: {error}"), dynamic=dynamic).with_problems(problems)
        return self.external_source(dataset, dynamic=dynamic).with_problems(problems)

    def external_source(self, dataset: str, *, dynamic: bool) -> Frame:
        self.analysis.reads.add(dataset)
        return fr.source_frame(dataset, self.external_schema(dataset), dynamic=dynamic)

    def external_schema(self, dataset: str) -> TableSchema | None:
        """The columns of a JDBC table, stream or DynamoDB table, when a catalog table describes it."""
        if dataset not in self.analysis.schemas:
            for database, table in self.catalog.tables:
                try:
                    stored = self.endpoints.table_storage(database, table)
                except NamingError:
                    continue
                if stored == dataset:
                    schema = self.catalog.schema_or_none(database, table)
                    if schema is not None:
                        self.analysis.schemas[dataset] = schema
                        break
        return self.analysis.schemas.get(dataset)

    def external_write(
        self, node: ast.AST, frame_value: Value | None, name: Callable[[], str], problems: list[Problem]
    ) -> None:
        try:
            dataset = name()
        except NamingError as error:
            self.write(node, None, None, frame_value, [*problems, self.site(node).problem(f"sink: {error}")])
            return
        self.write(node, dataset, self.external_schema(dataset), frame_value, problems)

    def option_strings(self, value: Value | None, node: ast.AST) -> tuple[dict[str, str], list[Problem]]:
        """The options given as strings; an option left unresolved is a problem naming it."""
        if value is None:
            return {}, []
        if not isinstance(value, Dict):
            return {}, [self.site(node).problem(f"connection options are not resolved{self.reason(value)}")]
        strings: dict[str, str] = {}
        problems: list[Problem] = []
        for key, item in value.items:
            name = const_str(key)
            if name is None:
                continue
            ok, python = literal(item)
            if ok and isinstance(python, str | int | float | bool):
                strings[name] = str(python)
            elif isinstance(item, Unknown) and name in _NAMING_OPTIONS:
                problems.append(self.site(node).problem(f"option {name} is not resolved: {item.problem.message}"))
        return strings, problems

    @staticmethod
    def reason(value: Value | None) -> str:
        return f": {value.problem.message}" if isinstance(value, Unknown) else ""

    def options_sink(self, frame_value: Value | None, bound: dict[str, Value], node: ast.AST) -> None:
        connection = const_str(bound.get("connection_type"))
        options = bound.get("connection_options")
        if connection == "s3" and isinstance(options, Dict):
            dataset, schema, problems = self.path_target(options.get("path"), node)
            self.write(node, dataset, schema, frame_value, problems)
            return
        if connection is None:
            problem = self.site(node).problem(
                f"the connection type is not resolved{self.reason(bound.get('connection_type'))}"
            )
            self.write(node, None, None, frame_value, [problem])
            return
        strings, problems = self.option_strings(options, node)
        self.external_write(node, frame_value, lambda: self.endpoints.options_dataset(connection, strings), problems)

    def catalog_target(
        self, database: Value | None, table: Value | None, node: ast.AST
    ) -> tuple[str | None, TableSchema | None, list[Problem]]:
        database_name, table_name = const_str(database), const_str(table)
        if database_name is None or table_name is None:
            reason = next((v.problem.message for v in (database, table) if isinstance(v, Unknown)), "")
            message = "target table name is not resolved" + (f": {reason}" if reason else "")
            return None, None, [self.site(node).problem(message)]
        return self.catalog_dataset(database_name, table_name, self.site(node))

    def path_target(self, path: Value | None, node: ast.AST) -> tuple[str | None, TableSchema | None, list[Problem]]:
        text = const_str(path)
        if text is None:
            reason = path.problem.message if isinstance(path, Unknown) else "no path given"
            return None, None, [self.site(node).problem(f"target path is not resolved: {reason}")]
        dataset, schema = self.path_dataset(text)
        return dataset, schema, []

    def frame(self, value: Value | None, node: ast.AST) -> Frame:
        if isinstance(value, FrameValue):
            return value.frame
        if isinstance(value, Unknown):
            return opaque_frame(value.problem)
        return opaque_frame(self.site(node).problem("a frame is expected here but the value is not resolved"))

    def write(
        self,
        node: ast.AST,
        dataset: str | None,
        schema: TableSchema | None,
        frame_value: Value | None,
        problems: Sequence[Problem],
        *,
        by_position: bool = False,
    ) -> None:
        site = self.site(node)
        frame = self.frame(frame_value, node)
        if dataset is None:
            columns: tuple[OutputColumn, ...] = ()
            found: tuple[Problem, ...] = ()
        else:
            columns, found = fr.written_columns(frame, schema, by_position=by_position, site=site)
        self.analysis.writes.append(
            Write(site, dataset, columns, frame.dataset, frame.inputs, merge_problems(frame.problems, problems, found))
        )
