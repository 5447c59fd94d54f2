"""Lineage of one Glue PySpark script, read with ``ast`` and never run.

The script is walked statement by statement, the way Python would run it, but over the values of
``values``: literals and job arguments are followed exactly, frames carry their column lineage
(``frames``), and everything else is ``Unknown`` with the reason why. Functions defined in the script
or in its extra .py files are analysed when they are called, with their arguments bound. Conditions
that depend on run-time data are not guessed: both branches are analysed and the report says so.

Sources: ``create_dynamic_frame.from_catalog`` / ``from_options``, ``create_data_frame``,
``spark.read...``, ``spark.table``, ``spark.sql``. Sinks: ``write_dynamic_frame.from_options`` /
``from_catalog``, ``getSink(...).writeFrame``, ``df.write...`` (``save``, ``parquet``, ...,
``saveAsTable``, ``insertInto``), ``df.writeTo(...)``, and ``INSERT`` / ``CREATE TABLE AS`` in
``spark.sql``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from lakeline.engines.base import TableSchema
from lakeline.errors import InvalidInputError
from lakeline.glue_scanner import frames as fr
from lakeline.glue_scanner import nested
from lakeline.glue_scanner.catalog import GlueCatalog, normalize_location
from lakeline.glue_scanner.column_exprs import (
    Alias,
    Bound,
    Call,
    Cast,
    ColExpr,
    Lit,
    Opaque,
    Over,
    Problem,
    Ref,
    Site,
    Star,
    When,
    function_call,
    parse_sql_expression,
)
from lakeline.glue_scanner.connections import Endpoints
from lakeline.glue_scanner.datasets import NamingError
from lakeline.glue_scanner.frames import Frame, merge_problems, opaque_frame
from lakeline.glue_scanner.py2 import convert_python2
from lakeline.glue_scanner.python_eval import (
    ModuleSource,
    PythonEvaluator,
    const_str,
    flatten,
    literal,
)
from lakeline.glue_scanner.spark_sql import DEFAULT_DATABASE, run_spark_sql
from lakeline.glue_scanner.values import (
    Args,
    ColumnValue,
    Const,
    Dict,
    FrameValue,
    Function,
    Lib,
    Obj,
    Seq,
    Unknown,
    Value,
)
from lakeline.lineage.columns.model import Dependencies, OutputColumn, Subtype, identity_of

RUN_TIME_ARGUMENTS = frozenset({"JOB_RUN_ID", "JOB_ID", "SECURITY_CONFIGURATION", "encryption-type"})
"""Arguments Glue sets per run: their values are not in the job's configuration."""

GLUE_TRANSFORMS = frozenset(
    [
        "ApplyMapping",
        "SelectFields",
        "DropFields",
        "RenameField",
        "Join",
        "Filter",
        "DropNullFields",
        "ResolveChoice",
        "Map",
        "FlatMap",
        "Relationalize",
        "SplitFields",
        "SplitRows",
        "Unbox",
        "UnnestFrame",
        "Spigot",
        "SelectFromCollection",
        "ErrorsAsDynamicFrame",
        "FillMissingValues",
        "FindMatches",
        "FindIncrementalMatches",
        "EvaluateDataQuality",
    ]
)

_VARIADIC_COLUMN_FUNCTIONS = frozenset(
    [
        "coalesce",
        "concat",
        "greatest",
        "least",
        "array",
        "struct",
        "create_map",
        "countdistinct",
        "count_distinct",
        "hash",
        "xxhash64",
        "map_concat",
        "arrays_zip",
        "named_struct",
    ]
)
_COLUMNS_AFTER_FIRST = frozenset({"concat_ws", "format_string"})
_PASSTHROUGH_FRAME_METHODS = frozenset(
    [
        "limit",
        "repartition",
        "repartitionByRange",
        "coalesce",
        "cache",
        "persist",
        "unpersist",
        "checkpoint",
        "localCheckpoint",
        "hint",
        "sample",
        "withWatermark",
        "fillna",
        "replace",
        "spigot",
        "assertNotNull",
    ]
)
_SORT_METHODS = frozenset({"orderBy", "sort", "sortWithinPartitions"})
_ACTIONS = frozenset(
    [
        "count",
        "show",
        "collect",
        "take",
        "head",
        "first",
        "printSchema",
        "explain",
        "toPandas",
        "isEmpty",
        "foreach",
        "foreachPartition",
        "toJSON",
        "describe",
        "summary",
    ]
)
_FILE_FORMATS = frozenset({"parquet", "csv", "json", "orc", "text", "avro", "xml"})
_TABLE_FORMATS = frozenset({"delta", "iceberg", "hudi", "org.apache.hudi"})
"""Formats whose ``load``/``save`` take a path or a table name, as files do."""
_CONNECTOR_FORMATS = {"net.snowflake.spark.snowflake": "snowflake", "aws-kinesis": "kinesis"}
_STREAM_RECORD_COLUMNS = {
    "kafka": ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType"),
    "kinesis": ("data", "streamName", "partitionKey", "sequenceNumber", "approximateArrivalTimestamp"),
}

# Parameter names of Glue API calls, for arguments given by position.
_CREATE_FROM_CATALOG = ("database", "table_name", "redshift_tmp_dir", "transformation_ctx", "push_down_predicate")
_CREATE_DATA_FRAME_FROM_CATALOG = ("database", "table_name", "transformation_ctx", "additional_options")
_CREATE_FROM_OPTIONS = ("connection_type", "connection_options", "format", "format_options", "transformation_ctx")
_WRITE_FROM_OPTIONS = ("frame", "connection_type", "connection_options", "format", "format_options")
_WRITE_FROM_CATALOG = ("frame", "database", "table_name", "redshift_tmp_dir", "transformation_ctx")
_WRITE_FROM_JDBC_CONF = ("frame", "catalog_connection", "connection_options", "redshift_tmp_dir", "transformation_ctx")
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
_TRANSFORM_PARAMETERS: dict[str, tuple[str, ...]] = {
    "ApplyMapping": ("frame", "mappings"),
    "SelectFields": ("frame", "paths"),
    "DropFields": ("frame", "paths"),
    "RenameField": ("frame", "old_name", "new_name"),
    "Join": ("frame1", "frame2", "keys1", "keys2"),
    "Filter": ("frame", "f"),
    "DropNullFields": ("frame",),
    "ResolveChoice": ("frame", "specs", "choice"),
    "Map": ("frame", "f"),
    "Relationalize": ("frame", "staging_path", "name"),
    "Spigot": ("frame", "path"),
    "SelectFromCollection": ("dfc", "key"),
}


@dataclass(frozen=True)
class Write:
    """One sink of the script: the dataset written (``None`` if not resolved) and its column lineage."""

    site: Site
    target: str | None
    columns: tuple[OutputColumn, ...]
    dataset: Dependencies
    inputs: frozenset[str]
    problems: tuple[Problem, ...] = ()


@dataclass
class ScriptAnalysis:
    writes: list[Write] = field(default_factory=list)
    reads: set[str] = field(default_factory=set)
    """Every dataset the script reads, whether or not it reaches a sink."""
    problems: list[Problem] = field(default_factory=list)
    schemas: dict[str, TableSchema] = field(default_factory=dict)
    python2: bool = False
    """The script is Python 2 (Glue 0.9) and was analysed after its Python 2 syntax was rewritten."""
    """Known columns of datasets outside the catalog (a JDBC or DynamoDB table the catalog describes)."""

    def unresolved(self) -> list[Problem]:
        found = list(self.problems)
        for write in self.writes:
            found.extend(write.problems)
        if not self.writes:
            found.append(Problem(0, "the script writes nothing that is recognised as a sink"))
        return sorted(merge_problems(found), key=lambda p: (p.file != "", p.file, p.line, p.message))


@dataclass(frozen=True)
class ScriptContext:
    job_name: str
    arguments: Mapping[str, str]
    """The run's arguments, ``--NAME`` keys."""
    catalog: GlueCatalog
    modules: Mapping[str, ModuleSource] = field(default_factory=dict)
    libraries: frozenset[str] = frozenset()
    """Top-level names of pip modules the job installs (``--additional-python-modules``)."""
    region: str | None = None
    account: str | None = None
    """Where the job runs: DynamoDB tables and Kinesis streams are named with them."""


def analyse_script(source: str, filename: str, context: ScriptContext) -> ScriptAnalysis:
    """The sinks, sources and unresolved parts of ``source``; a syntax error is an ``InvalidInputError``."""
    python2 = False
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as error:
        # Glue 0.9 ran Python 2: such a script is read once its Python 2 syntax is rewritten.
        converted = convert_python2(source)
        try:
            tree = ast.parse(converted if converted is not None else source, filename=filename)
        except SyntaxError:
            raise InvalidInputError(f"{filename} line {error.lineno}: syntax error: {error.msg}") from error
        python2 = True
    interpreter = _GlueScriptInterpreter(context)
    interpreter.analysis.python2 = python2
    interpreter.run_main(tree, filename)
    interpreter.analysis.problems.extend(interpreter.problems)
    return interpreter.analysis


class _GlueScriptInterpreter(PythonEvaluator):
    """The Glue and Spark API over ``PythonEvaluator``: frames, columns, sources and sinks."""

    def __init__(self, context: ScriptContext) -> None:
        super().__init__(context.modules, context.libraries)
        self.context = context
        self.catalog = context.catalog
        self.endpoints = Endpoints(context.catalog, context.region, context.account)
        self.analysis = ScriptAnalysis()
        self.views: dict[str, Frame] = {}

    def effects(self) -> int:
        return len(self.analysis.writes)

    def star_provides(self, library: str, name: str) -> bool:
        if library == "awsglue.transforms":
            return name in GLUE_TRANSFORMS
        if library == "pyspark.sql.functions":
            return name[:1].islower()
        if library == "pyspark.sql.types":
            return name.endswith("Type") or name == "StructField"
        return name in _STAR_NAMES.get(library, ())

    def mutation_hook(
        self, receiver: Value, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call
    ) -> Value | None:
        if isinstance(receiver, Obj) and receiver.kind == "sink" and name in ("setCatalogInfo", "setFormat"):
            return self.sink_method(receiver, name, args, kwargs, node)
        return None

    def set_item_hook(self, receiver: Value, key: Value, value: Value | None, node: ast.AST) -> Value | None:
        name = const_str(key)
        if not (isinstance(receiver, Obj) and receiver.kind == "row" and receiver.frame is not None and name):
            return None
        if value is None:
            return Obj("row", fr.drop(receiver.frame, [name]))
        return Obj(
            "row", fr.with_column(receiver.frame, name, self.column(value, node, strings=False), self.site(node))
        )

    def library_call(self, path: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Value:
        values = [*args, *kwargs.values()]
        if not path.startswith(("pyspark", "awsglue")) and any(isinstance(v, ColumnValue) for v in values):
            # A plain function over a record's fields (inside Map or a UDF body): computed from them.
            return ColumnValue(
                Call(path.rsplit(".", 1)[-1], tuple(self.column(v, node, strings=False) for v in values))
            )
        return super().library_call(path, args, kwargs, node)

    def decorator_hook(self, decorator: Value, function: Function) -> Value | None:
        path = decorator.path if isinstance(decorator, Lib) else ""
        if (isinstance(decorator, Obj) and decorator.kind == "udf") or path.endswith(("udf", "pandas_udf")):
            return Obj("udf")
        return None

    def library_value(self, path: str) -> Value:
        if path == "sys.argv":
            # What Glue passes the script: the run's arguments, so ``'--X' in sys.argv`` is known.
            argv: list[Value] = [Const("script.py")]
            for key, value in self.context.arguments.items():
                argv.extend((Const(key), Const(value)))
            return Seq(tuple(argv))
        return Lib(path)

    def operator_hook(self, symbol: str, operands: Sequence[Value], node: ast.AST) -> Value | None:
        if symbol in ("in", "not in") and len(operands) == 2 and isinstance(operands[1], Args):
            key = const_str(operands[0])
            if key is None:
                return None
            return Const((operands[1].get(key) is not None) == (symbol == "in"))
        if not any(isinstance(operand, ColumnValue) for operand in operands):
            return None
        return ColumnValue(Call(symbol, tuple(self.column(o, node, strings=False) for o in operands)))

    def call_hook(self, callee: Value, args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Value:
        if isinstance(callee, Obj) and callee.kind == "udf":
            if args and isinstance(args[0], Function):
                return Obj("udf")  # udf(python_function, returnType)
            return ColumnValue(Call("udf", tuple(self.column(a, node) for a in args)))
        return self.unknown(node, "a call of this value is not analysed")

    def attribute_hook(self, receiver: Value, name: str, node: ast.AST) -> Value:
        if isinstance(receiver, Unknown):
            # ``x.write`` is a DataFrame's writer: where it writes is known even if the frame is not.
            return Obj("writer", opaque_frame(receiver.problem)) if name == "write" else receiver
        if isinstance(receiver, FrameValue):
            frame = receiver.frame
            if name in ("write", "writeStream"):
                return Obj("writer", frame)
            if name == "rdd":
                return Obj("rdd", frame)
            if name == "na":
                return Obj("na", frame)
            if name == "columns":
                if frame.is_open:
                    return self.unknown(node, "the frame's columns are not all known")
                return Seq(tuple(Const(n) for n in frame.column_names()))
            if name in ("schema", "dtypes", "sql_ctx", "sparkSession", "storageLevel"):
                return self.unknown(node, f"DataFrame.{name} is not analysed")
            deps, problems = fr.resolve_name(frame, name, self.site(node))
            return ColumnValue(Bound(name, deps, problems))
        if isinstance(receiver, Obj):
            if receiver.kind == "glue_context":
                if name in ("create_dynamic_frame", "create_data_frame", "write_dynamic_frame", "write_data_frame"):
                    return Obj(f"glue.{name}")
                if name in ("spark_session", "sparkSession"):
                    return Obj("spark")
            if receiver.kind == "spark":
                if name in ("read", "readStream"):
                    return Obj("reader")
                if name in ("catalog", "conf", "sparkContext", "udf"):
                    return Obj(f"spark.{name}")
            return self.unknown(node, f"attribute {name} of {receiver.kind} is not analysed")
        return self.unknown(node, f"attribute {name} is not analysed")

    def subscript_hook(self, receiver: Value, index: Value, node: ast.AST) -> Value | None:
        if isinstance(receiver, Args):
            key = const_str(index)
            found = receiver.get(key) if key is not None else None
            if found is not None:
                return found
            return self.unknown(node, f"args[{key!r}] is not one of the arguments asked for")
        if isinstance(receiver, FrameValue):
            frame = receiver.frame
            if isinstance(index, Const) and isinstance(index.value, str):
                deps, problems = fr.resolve_name(frame, index.value, self.site(node))
                return ColumnValue(Bound(index.value, deps, problems))
            if isinstance(index, Seq):
                return FrameValue(fr.select(frame, self.columns(index.items, node), self.site(node)))
            if isinstance(index, ColumnValue):
                return FrameValue(fr.indirect(frame, [index.expr], Subtype.FILTER, self.site(node)))
        if isinstance(receiver, ColumnValue) and isinstance(index, Const):
            return receiver  # a field of a struct or an item of an array: part of the column's value
        if isinstance(receiver, Obj) and receiver.kind == "row" and receiver.frame is not None:
            key = const_str(index)
            if key is not None:
                deps, problems = fr.resolve_name(receiver.frame, key, self.site(node))
                return ColumnValue(Bound(key, deps, problems))
        return None

    def method_hook(
        self, receiver: Value, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call
    ) -> Value:
        if isinstance(receiver, Unknown):
            if name in ("createOrReplaceTempView", "createTempView", "writeTo"):
                return self.frame_method(opaque_frame(receiver.problem), name, args, kwargs, node)
            return receiver
        if isinstance(receiver, FrameValue):
            return self.frame_method(receiver.frame, name, args, kwargs, node)
        if isinstance(receiver, ColumnValue):
            return self.column_method(receiver.expr, name, args, kwargs, node)
        if isinstance(receiver, Obj):
            return self.object_method(receiver, name, args, kwargs, node)
        if isinstance(receiver, Dict) and name == "select":
            key = const_str(args[0] if args else kwargs.get("key"))
            found = receiver.get(key) if key is not None else None
            return found if found is not None else self.unknown(node, f"the collection holds no frame {key!r}")
        if isinstance(receiver, Args) and name == "get":
            key = const_str(args[0]) if args else None
            found = receiver.get(key) if key is not None else None
            if found is not None:
                return found  # asked for: the run has it, or fails before ``get`` could default
            return args[1] if len(args) > 1 else Const(None)
        return self.unknown(node, f"method {name}() is not analysed")

    def library_hook(self, path: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Value:
        parts = path.split(".")
        last = parts[-1]
        if last == "getResolvedOptions":
            return self.resolved_options(args, kwargs, node)
        if parts[0] == "awsglue":
            return self.glue_library_call(parts, args, kwargs, node)
        if parts[0] == "pyspark":
            if last in ("SparkContext", "getOrCreate") and "SparkContext" in parts:
                return Obj("spark_context")
            if "builder" in parts:
                return Obj("spark") if last == "getOrCreate" else Lib(path)
            if last in ("getActiveSession", "active") and "SparkSession" in parts:
                return Obj("spark")
            if len(parts) >= 4 and parts[:3] == ["pyspark", "sql", "functions"]:
                return self.spark_function(parts[3], args, kwargs, node)
            if "Window" in parts[:-1]:
                return Obj("window", exprs=tuple(self.columns(flatten(args), node)))
            if len(parts) >= 3 and parts[2] == "types":
                return Lib(f"{path}()")
        return self.unknown(node, f"call to {path} is not analysed")

    def glue_library_call(self, parts: list[str], args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Value:
        last = parts[-1]
        if last == "GlueContext":
            return Obj("glue_context")
        if last == "Job":
            return Obj("job")
        if last == "fromDF" and "DynamicFrame" in parts:
            bound = self.bind(("dataframe", "glue_ctx", "name"), args, kwargs)
            frame = self.frame(bound.get("dataframe"), node)
            return FrameValue(replace(frame, dynamic=True))
        if last == "DynamicFrameCollection":
            bound = self.bind(("dynamic_frames", "glue_ctx"), args, kwargs)
            collection = bound.get("dynamic_frames")
            return (
                collection if isinstance(collection, Dict) else self.unknown(node, "a frame collection is not resolved")
            )
        if last == "apply" and len(parts) >= 2 and parts[-2] in GLUE_TRANSFORMS:
            return self.glue_transform(parts[-2], args, kwargs, node)
        if last in GLUE_TRANSFORMS:
            return Lib(".".join(parts))  # an instance of the transform: ``ApplyMapping()(frame=...)`` is rare
        return self.unknown(node, f"call to {'.'.join(parts)} is not analysed")

    def resolved_options(self, args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Value:
        bound = self.bind(("args", "options"), args, kwargs)
        names = bound.get("options")
        if not isinstance(names, Seq):
            return self.unknown(node, "getResolvedOptions names no argument list that can be read")
        values: list[tuple[str, Value]] = []
        for item in names.items:
            name = const_str(item)
            if name is None:
                continue
            key = f"--{name}"
            if key in self.context.arguments:
                values.append((name, Const(self.context.arguments[key])))
            elif name in RUN_TIME_ARGUMENTS:
                values.append((name, self.unknown(node, f"job argument {name} is only known when the job runs")))
            else:
                # Glue stops the job here when an asked-for argument is missing: reported at this call.
                message = (
                    f"job argument --{name} has no value: it is not in DefaultArguments, the run arguments "
                    "or NonOverridableArguments"
                )
                self.report(node, message)
                values.append((name, self.unknown(node, message)))
        return Args(tuple(values))

    # Glue --------------------------------------------------------------------------------------

    def object_method(self, obj: Obj, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Value:
        kind = obj.kind
        if kind == "glue_context":
            return self.glue_context_method(name, args, kwargs, node)
        if kind.startswith("glue."):
            return self.glue_context_method(f"{kind[len('glue.') :]}_{name}", args, kwargs, node)
        if kind == "sink":
            return self.sink_method(obj, name, args, kwargs, node)
        if kind == "spark":
            return self.spark_method(name, args, kwargs, node)
        if kind == "reader":
            return self.reader_method(obj, name, args, kwargs, node)
        if kind in ("writer", "writer_v2"):
            return self.writer_method(obj, name, args, kwargs, node)
        if kind == "grouped" and obj.frame is not None:
            return self.grouped_method(obj, name, args, kwargs, node)
        if kind == "window":
            if name in ("partitionBy", "orderBy"):
                return Obj("window", exprs=(*obj.exprs, *self.columns(flatten(args), node)))
            return obj  # rowsBetween, rangeBetween
        if kind == "na" and obj.frame is not None:
            if name == "drop":
                subset = kwargs.get("subset") or (args[2] if len(args) > 2 else None)
                keys = self.columns(flatten([subset]), node) if subset else fr.all_columns(obj.frame)
                return FrameValue(fr.indirect(obj.frame, keys, Subtype.FILTER, self.site(node)))
            return FrameValue(obj.frame)  # fill, replace: values change, not where they come from
        if kind == "rdd" and obj.frame is not None:
            return self.rdd_method(obj.frame, name, node)
        if kind == "udf" and name in ("asNondeterministic",):
            return obj
        if kind in ("job", "spark_context", "spark.conf", "spark.catalog", "spark.udf", "spark.sparkContext"):
            return Const(None)
        return self.unknown(node, f"{kind}.{name}() is not analysed")

    def rdd_method(self, frame: Frame, name: str, node: ast.Call) -> Value:
        """``df.rdd.map(...)``: the rows are not followed, but the datasets they come from are."""
        if name == "toDF":
            return FrameValue(frame)
        problem = self.site(node).problem(f"RDD.{name}() changes rows in ways that are not analysed")
        return Obj("rdd", opaque_frame(problem, inputs=frame.inputs))

    def glue_context_method(self, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Value:
        site = self.site(node)
        if name in ("create_dynamic_frame_from_rdd", "create_data_frame_from_rdd"):
            data = self.bind(("data", "name", "schema"), args, kwargs).get("data")
            if isinstance(data, Obj) and data.kind == "rdd" and data.frame is not None:
                return FrameValue(replace(data.frame, dynamic=name.startswith("create_dynamic")))
            problem = site.problem(f"the rows given to {name} are not analysed")
            return FrameValue(opaque_frame(problem, dynamic=name.startswith("create_dynamic")))
        if name == "forEachBatch":
            # Streaming: the batch function gets each micro-batch as a DataFrame of the stream.
            bound = self.bind(("frame", "batch_function", "options"), args, kwargs)
            function = bound.get("batch_function")
            if not isinstance(function, Function):
                self.report(node, "the forEachBatch batch function is not resolved")
                return Const(None)
            batch_id = self.unknown(node, "the batch id is only known when the stream runs")
            self.call_function(function, [bound.get("frame") or Const(None), batch_id], {}, node)
            return Const(None)
        if name in ("create_dynamic_frame_from_catalog", "create_data_frame_from_catalog"):
            dynamic = name.startswith("create_dynamic")
            params = _CREATE_FROM_CATALOG if dynamic else _CREATE_DATA_FRAME_FROM_CATALOG
            bound = self.bind(params, args, kwargs)
            database = bound.get("database") or bound.get("name_space")
            frame = self.catalog_source(database, bound.get("table_name"), node, dynamic=dynamic)
            predicate = const_str(bound.get("push_down_predicate"))
            if predicate:
                frame = fr.indirect(frame, [parse_sql_expression(predicate, site)], Subtype.FILTER, site)
            return FrameValue(frame)
        if name in ("create_dynamic_frame_from_options", "create_data_frame_from_options"):
            bound = self.bind(_CREATE_FROM_OPTIONS, args, kwargs)
            return FrameValue(self.options_source(bound, node, dynamic=name.startswith("create_dynamic")))
        if name in ("write_dynamic_frame_from_options", "write_from_options", "write_data_frame_from_options"):
            bound = self.bind(_WRITE_FROM_OPTIONS, args, kwargs)
            frame_value = bound.get("frame") or bound.get("frame_or_dfc")
            self.options_sink(frame_value, bound, node)
            return frame_value if frame_value is not None else Const(None)
        if name in ("write_dynamic_frame_from_catalog", "write_data_frame_from_catalog"):
            bound = self.bind(_WRITE_FROM_CATALOG, args, kwargs)
            database = bound.get("database") or bound.get("name_space")
            dataset, schema, problems = self.catalog_target(database, bound.get("table_name"), node)
            self.write(node, dataset, schema, bound.get("frame"), problems)
            return bound.get("frame") or Const(None)
        if name in ("write_dynamic_frame_from_jdbc_conf", "write_from_jdbc_conf", "write_data_frame_from_jdbc_conf"):
            bound = self.bind(_WRITE_FROM_JDBC_CONF, args, kwargs)
            frame_value = bound.get("frame") or bound.get("frame_or_dfc")
            connection_value = bound.get("catalog_connection")
            connection_name = const_str(connection_value)
            options, problems = self.option_strings(bound.get("connection_options"), node)
            if connection_name is None:
                problems.append(site.problem(f"the Glue connection is not resolved{self.reason(connection_value)}"))
                self.write(node, None, None, frame_value, problems)
            else:
                self.external_write(
                    node,
                    frame_value,
                    lambda: self.endpoints.jdbc(connection_name, options, what="the sink"),
                    problems,
                )
            return Const(None)
        if name == "getSink":
            bound = self.bind(("connection_type", "format", "transformation_ctx"), args, kwargs)
            connection = const_str(bound.get("connection_type")) or "s3"
            sink = Obj("sink", settings=(("connection_type", Const(connection)),))
            if "path" in bound:
                sink = sink.with_setting("path", bound["path"])
            return sink
        if name in ("getSource", "getSourceWithFormat"):
            return FrameValue(opaque_frame(site.problem("glueContext.getSource(...) sources are not analysed")))
        if name in ("purge_table", "purge_s3_path", "transition_table", "transition_s3_path", "get_logger", "commit"):
            return Const(None)
        return self.unknown(node, f"glueContext.{name}() is not analysed")

    def sink_method(self, sink: Obj, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Value:
        if name == "setCatalogInfo":
            bound = self.bind(("catalogDatabase", "catalogTableName", "catalogId"), args, kwargs)
            return sink.with_setting("database", bound.get("catalogDatabase", Const(None))).with_setting(
                "table", bound.get("catalogTableName", Const(None))
            )
        if name == "writeFrame":
            frame_value = self.bind(("dynamic_frame",), args, kwargs).get("dynamic_frame")
            if sink.setting("table") is not None:
                dataset, schema, problems = self.catalog_target(sink.setting("database"), sink.setting("table"), node)
                self.write(node, dataset, schema, frame_value, problems)
            elif const_str(sink.setting("connection_type")) == "s3":
                dataset, schema, problems = self.path_target(sink.setting("path"), node)
                self.write(node, dataset, schema, frame_value, problems)
            else:
                problem = self.site(node).problem(
                    f"{const_str(sink.setting('connection_type'))} sinks are not analysed"
                )
                self.write(node, None, None, frame_value, [problem])
            return Const(None)
        if name == "setFormat":
            return sink.with_setting("format", args[0] if args else Const(None))
        return Const(None)  # other settings do not change what is written where

    def glue_transform(self, transform: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Value:
        site = self.site(node)
        bound = self.bind(_TRANSFORM_PARAMETERS.get(transform, ("frame",)), args, kwargs)
        if transform == "SelectFromCollection":
            collection, key = bound.get("dfc"), bound.get("key")
            if isinstance(collection, Dict) and isinstance(key, Const):
                found = collection.get(key.value)
                if found is not None:
                    return found
            return self.unknown(node, "SelectFromCollection picks a frame that is not resolved")
        if transform == "Join":
            first, second = self.frame(bound.get("frame1"), node), self.frame(bound.get("frame2"), node)
            keys1, keys2 = self.names(bound.get("keys1"), node), self.names(bound.get("keys2"), node)
            if keys1 is None or keys2 is None:
                problem = site.problem("Join keys are not resolved")
                return FrameValue(fr.glue_join(first, second, [], [], site).with_problems([problem]))
            return FrameValue(fr.glue_join(first, second, keys1, keys2, site))
        frame = self.frame(bound.get("frame"), node)
        frame = replace(frame, dynamic=True)
        if transform == "ApplyMapping":
            mappings = self.mappings(bound.get("mappings"))
            if mappings is None:
                problem = site.problem("ApplyMapping mappings are not resolved")
                return FrameValue(opaque_frame(problem, inputs=frame.inputs, dynamic=True))
            return FrameValue(fr.apply_mapping(frame, [(a, b, c, d) for a, b, c, d in mappings], site))
        if transform in ("SelectFields", "DropFields"):
            paths = self.names(bound.get("paths"), node)
            if paths is None:
                problem = site.problem(f"{transform} paths are not resolved")
                return FrameValue(opaque_frame(problem, inputs=frame.inputs, dynamic=True))
            if transform == "DropFields":
                return FrameValue(fr.drop(frame, paths))
            return FrameValue(fr.select(frame, [Ref(p) for p in paths], site))
        if transform == "RenameField":
            old, new = const_str(bound.get("old_name")), const_str(bound.get("new_name"))
            if old is None or new is None:
                return FrameValue(frame.with_problems([site.problem("RenameField names are not resolved")]))
            return FrameValue(fr.rename(frame, old, new, site))
        if transform == "Filter":
            return FrameValue(self.glue_filter(frame, bound.get("f"), node))
        if transform == "Map":
            return FrameValue(self.glue_map(frame, bound.get("f"), node))
        if transform == "ResolveChoice":
            specs = self.mappings(bound.get("specs"), size=2)
            choice = const_str(bound.get("choice")) or None
            if specs is None:
                problem = site.problem("resolveChoice specs are not resolved")
                return FrameValue(frame.with_problems([problem]))
            return FrameValue(nested.resolve_choice(frame, [(a, b) for a, b, *_ in specs], choice, site))
        if transform == "Relationalize":
            root = const_str(bound.get("name")) or "roottable"
            tables = nested.relationalize(frame, root, self.catalog, site)
            return Dict(tuple((Const(name), FrameValue(table)) for name, table in tables.items()))
        if transform in ("DropNullFields", "Spigot", "FillMissingValues", "EvaluateDataQuality"):
            return FrameValue(frame)
        problem = site.problem(f"{transform} changes the frame in ways that are not analysed")
        return FrameValue(opaque_frame(problem, inputs=frame.inputs, dynamic=True))

    def glue_filter(self, frame: Frame, function: Value | None, node: ast.Call) -> Frame:
        site = self.site(node)
        if not isinstance(function, Function):
            return frame.with_problems([site.problem("the filter function is not resolved")])
        result = self.call_function(function, [Obj("row", frame)], {}, node)
        if isinstance(result, ColumnValue):
            return fr.indirect(frame, [result.expr], Subtype.FILTER, site)
        if isinstance(result, Unknown):
            return frame.with_problems([result.problem])
        return frame

    def mappings(self, value: Value | None, size: int = 4) -> list[tuple[str, ...]] | None:
        """ApplyMapping's 4-tuples (``size`` 2: resolveChoice's specs); ``[]`` when none are given."""
        if value is None or (isinstance(value, Const) and value.value is None):
            return [] if size == 2 else None
        ok, python = literal(value)
        if not ok or not isinstance(python, list):
            return None
        result = []
        for item in python:
            if not isinstance(item, list) or len(item) != size or not all(isinstance(part, str) for part in item):
                return None
            result.append(tuple(item))
        return result

    def glue_map(self, frame: Frame, function: Value | None, node: ast.Call) -> Frame:
        """``Map.apply(frame, f)``: ``f`` gets each record; the fields it sets and deletes are followed."""
        site = self.site(node)
        if not isinstance(function, Function):
            problem = site.problem("the Map function is not resolved")
            return opaque_frame(problem, inputs=frame.inputs, dynamic=True)
        result = self.call_function(function, [Obj("row", frame)], {}, node)
        if isinstance(result, Obj) and result.kind == "row" and result.frame is not None:
            return replace(result.frame, dynamic=True)
        problem = result.problem if isinstance(result, Unknown) else site.problem("the Map function returns no record")
        return opaque_frame(problem, inputs=frame.inputs, dynamic=True)

    def names(self, value: Value | None, node: ast.AST) -> list[str] | None:
        if value is None:
            return None
        items = flatten([value])
        texts = [const_str(item) for item in items]
        return [t for t in texts if t is not None] if all(t is not None for t in texts) else None

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
        return normalize_location(path), None

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

    # Spark -------------------------------------------------------------------------------------

    def spark_method(self, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Value:
        site = self.site(node)
        if name == "sql":
            query = args[0] if args else kwargs.get("sqlQuery")
            text = const_str(query)
            if text is None:
                reason = query.problem.message if isinstance(query, Unknown) else "not a literal"
                return FrameValue(opaque_frame(site.problem(f"spark.sql text is not resolved: {reason}")))
            result = run_spark_sql(text, self.views, self.catalog, site)
            if result.write is not None:
                write = result.write
                self.analysis.reads.update(write.inputs)
                self.analysis.writes.append(
                    Write(
                        site, write.target, write.columns, write.dataset, frozenset(write.inputs), result.write_problems
                    )
                )
                return FrameValue(Frame())
            if result.view is not None and result.frame is not None:
                self.views[result.view] = result.frame
                return FrameValue(Frame())
            frame = result.frame or Frame()
            self.analysis.reads.update(frame.inputs)
            return FrameValue(frame)
        if name == "table":
            return FrameValue(self.table_source(args[0] if args else kwargs.get("tableName"), node))
        if name == "createDataFrame" and args and isinstance(args[0], Obj) and args[0].kind == "rdd":
            return FrameValue(args[0].frame or Frame())
        if name == "createDataFrame":
            schema = args[1] if len(args) > 1 else kwargs.get("schema")
            names = self.names(schema, node) if isinstance(schema, Seq) else None
            if names is not None:
                return FrameValue(Frame(columns=tuple(OutputColumn(n, frozenset()) for n in names)))
            return FrameValue(opaque_frame(site.problem("the columns of createDataFrame(...) are not resolved")))
        if name in ("stop", "newSession"):
            return Const(None) if name == "stop" else Obj("spark")
        return self.unknown(node, f"spark.{name}() is not analysed")

    def reader_method(
        self, reader: Obj, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call
    ) -> Value:
        if name in ("format", "schema"):
            return reader.with_setting(name, args[0] if args else kwargs.get("source", Const(None)))
        if name == "option":
            key = const_str(args[0]) if args else const_str(kwargs.get("key"))
            value = args[1] if len(args) > 1 else kwargs.get("value", Const(None))
            return reader.with_setting(f"option:{key}", value) if key else reader
        if name == "options":
            for key, value in kwargs.items():
                reader = reader.with_setting(f"option:{key}", value)
            return reader
        if name == "table":
            return FrameValue(self.table_source(args[0] if args else kwargs.get("tableName"), node))
        form = const_str(reader.setting("format"))
        if name == "load":
            paths = flatten(args[:1]) if args else flatten([kwargs["path"]]) if "path" in kwargs else []
            form = const_str(kwargs.get("format")) or form
            if not paths and reader.setting("option:path") is not None:
                paths = [reader.setting("option:path") or Const(None)]
            if form is not None and form.lower() not in _FILE_FORMATS | _TABLE_FORMATS:
                return FrameValue(self.settings_source(reader, form, node))
            if not paths:
                problem = self.site(node).problem(f"{form or 'this'} source is not analysed (no path)")
                return FrameValue(opaque_frame(problem))
            if len(paths) == 1 and (text := const_str(paths[0])) and "/" not in text and ":" not in text:
                return FrameValue(self.table_source(paths[0], node))  # a table format: load("db.table")
            return FrameValue(self.path_sources(paths, node, dynamic=False))
        if name in _FILE_FORMATS:
            paths = flatten(args[:1]) if args else flatten([kwargs["path"]]) if "path" in kwargs else []
            return FrameValue(self.path_sources(paths, node, dynamic=False))
        if name == "jdbc":
            bound = self.bind(("url", "table"), args, kwargs)
            options = {"url": bound.get("url") or Const(None), "dbtable": bound.get("table") or Const(None)}
            return FrameValue(self.settings_source(reader, "jdbc", node, options))
        return self.unknown(node, f"spark.read.{name}() is not analysed")

    def connector_options(self, settings: Obj, extra: Mapping[str, Value] | None) -> Dict:
        options = [
            (Const(key[len("option:") :]), value) for key, value in settings.settings if key.startswith("option:")
        ]
        options.extend((Const(key), value) for key, value in (extra or {}).items())
        return Dict(tuple(options))

    def settings_source(self, reader: Obj, form: str, node: ast.AST, extra: Mapping[str, Value] | None = None) -> Frame:
        """``spark.read(Stream).format("jdbc" | "kafka" | ...).option(...).load()``."""
        kind = _CONNECTOR_FORMATS.get(form, form)
        bound = {"connection_type": Const(kind), "connection_options": self.connector_options(reader, extra)}
        frame = self.options_source(bound, node, dynamic=False)
        if kind in _STREAM_RECORD_COLUMNS and len(frame.inputs) == 1:
            # Spark's own stream sources give the record envelope, whatever the payload's schema.
            (dataset,) = frame.inputs
            columns = tuple(OutputColumn(c, identity_of(dataset, c)) for c in _STREAM_RECORD_COLUMNS[kind])
            return replace(frame, columns=columns, open_groups=())
        return frame

    def writer_method(
        self, writer: Obj, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call
    ) -> Value:
        frame_value = FrameValue(writer.frame) if writer.frame is not None else None
        if name in ("mode", "format", "partitionBy", "bucketBy", "sortBy", "using", "partitionedBy", "tableProperty"):
            return writer.with_setting(name, args[0] if args else Const(None))
        if name == "option":
            key = const_str(args[0]) if args else None
            return writer.with_setting(f"option:{key}", args[1] if len(args) > 1 else Const(None)) if key else writer
        if name == "options":
            for key, value in kwargs.items():
                writer = writer.with_setting(f"option:{key}", value)
            return writer
        if writer.kind == "writer_v2":
            if name in ("append", "overwrite", "overwritePartitions", "create", "replace", "createOrReplace"):
                database, table = self.split_table_name(writer.setting("table"))
                dataset, schema, problems = self.catalog_target(database, table, node)
                self.write(node, dataset, schema, frame_value, problems)
                return Const(None)
            return self.unknown(node, f"DataFrameWriterV2.{name}() is not analysed")
        if name in ("saveAsTable", "insertInto"):
            database, table = self.split_table_name(args[0] if args else kwargs.get("name", kwargs.get("tableName")))
            dataset, schema, problems = self.catalog_target(database, table, node)
            self.write(node, dataset, schema, frame_value, problems, by_position=name == "insertInto")
            return Const(None)
        if name in ("outputMode", "trigger", "queryName"):
            return writer
        if name == "foreachBatch":
            function = args[0] if args else kwargs.get("func")
            if isinstance(function, Function):
                batch_id = self.unknown(node, "the batch id is only known when the stream runs")
                self.call_function(function, [frame_value or Const(None), batch_id], {}, node)
            else:
                self.report(node, "the foreachBatch function is not resolved")
            return writer.with_setting("format", Const("foreachBatch"))
        if name == "foreach":
            what = args[0] if args else None
            described = what.name if isinstance(what, Function) else "a writer object"
            problem = self.site(node).problem(
                f"writeStream.foreach({described}) hands each row to code whose target is not analysed"
            )
            self.write(node, None, None, frame_value, [problem])
            return writer.with_setting("format", Const("foreach"))
        if name == "toTable":
            name = "saveAsTable"
        if name == "save" or name == "start" or name in _FILE_FORMATS:
            path = args[0] if args else kwargs.get("path", writer.setting("option:path"))
            form = const_str(kwargs.get("format")) or const_str(writer.setting("format"))
            if form in ("foreachBatch", "foreach", "console", "memory", "noop"):
                return Const(None)  # written by the batch function, or not a dataset
            if form is not None and form.lower() not in _FILE_FORMATS | _TABLE_FORMATS:
                bound = {
                    "connection_type": Const(_CONNECTOR_FORMATS.get(form, form)),
                    "connection_options": self.connector_options(writer, None),
                }
                self.options_sink(frame_value, bound, node)
                return Const(None)
            if name == "save" and (text := const_str(path)) and "/" not in text and ":" not in text:
                database, table = self.split_table_name(path)
                dataset, schema, problems = self.catalog_target(database, table, node)
            else:
                dataset, schema, problems = self.path_target(path, node)
            self.write(node, dataset, schema, frame_value, problems)
            return Const(None)
        if name == "jdbc":
            bound = self.bind(("url", "table"), args, kwargs)
            options = {"url": bound.get("url") or Const(None), "dbtable": bound.get("table") or Const(None)}
            sink = {"connection_type": Const("jdbc"), "connection_options": self.connector_options(writer, options)}
            self.options_sink(frame_value, sink, node)
            return Const(None)
        return self.unknown(node, f"DataFrameWriter.{name}() is not analysed")

    def grouped_method(
        self, grouped: Obj, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call
    ) -> Value:
        frame = grouped.frame or Frame()
        site = self.site(node)
        if name == "agg":
            if len(args) == 1 and isinstance(args[0], Dict):
                aggregates: list[ColExpr] = []
                for key, value in args[0].items:
                    column, function = const_str(key), const_str(value)
                    if column is None or function is None:
                        aggregates.append(Opaque(site.problem("agg({...}) entry is not resolved")))
                    else:
                        aggregates.append(function_call(function, (Ref(column),)))
            else:
                aggregates = self.columns(flatten(args), node, strings=False)
            return FrameValue(fr.aggregate(frame, grouped.exprs, aggregates, site))
        if name == "count":
            return FrameValue(
                fr.aggregate(frame, grouped.exprs, [Alias(function_call("count", (Star(),)), "count")], site)
            )
        if name in ("sum", "avg", "mean", "min", "max"):
            names = self.names(Seq(tuple(args)), node) or []
            return FrameValue(fr.aggregate(frame, grouped.exprs, [function_call(name, (Ref(n),)) for n in names], site))
        problem = site.problem(f"groupBy(...).{name}() gives columns that are not analysed")
        return FrameValue(opaque_frame(problem, inputs=frame.inputs))

    def frame_method(
        self, frame: Frame, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call
    ) -> Value:
        site = self.site(node)
        dataframe = replace(frame, dynamic=False)
        if name == "toDF":
            names = self.names(Seq(tuple(args)), node) if args else []
            if names is None:
                return FrameValue(dataframe.with_problems([site.problem("toDF column names are not resolved")]))
            return FrameValue(fr.rename_by_position(dataframe, names, site) if names else dataframe)
        if frame.dynamic:
            result = self.dynamic_frame_method(frame, name, args, kwargs, node)
            if result is not None:
                return result
        if name == "select":
            return FrameValue(fr.select(frame, self.columns(flatten(args), node), site))
        if name == "selectExpr":
            texts = [const_str(a) for a in flatten(args)]
            exprs = [
                parse_sql_expression(t, site)
                if t is not None
                else Opaque(site.problem("selectExpr text is not resolved"))
                for t in texts
            ]
            return FrameValue(fr.select(frame, exprs, site))
        if name == "withColumn":
            bound = self.bind(("colName", "col"), args, kwargs)
            column_name = const_str(bound.get("colName"))
            if column_name is None:
                return FrameValue(frame.with_problems([site.problem("withColumn name is not resolved")]))
            return FrameValue(
                fr.with_column(frame, column_name, self.column(bound.get("col"), node, strings=False), site)
            )
        if name == "withColumns":
            mapping = args[0] if args else Dict(tuple((Const(k), v) for k, v in kwargs.items()))
            if not isinstance(mapping, Dict):
                return FrameValue(frame.with_problems([site.problem("withColumns mapping is not resolved")]))
            for key, value in mapping.items:
                column_name = const_str(key)
                if column_name is None:
                    frame = frame.with_problems([site.problem("withColumns name is not resolved")])
                    continue
                frame = fr.with_column(frame, column_name, self.column(value, node, strings=False), site)
            return FrameValue(frame)
        if name == "withColumnRenamed":
            old, new = (const_str(a) for a in [*args, Const(None), Const(None)][:2])
            if old is None or new is None:
                return FrameValue(frame.with_problems([site.problem("withColumnRenamed names are not resolved")]))
            return FrameValue(fr.rename(frame, old, new, site))
        if name == "withColumnsRenamed" and args and isinstance(args[0], Dict):
            for key, value in args[0].items:
                old, new = const_str(key), const_str(value)
                if old is not None and new is not None:
                    frame = fr.rename(frame, old, new, site)
            return FrameValue(frame)
        if name == "drop":
            names = [n for n in (const_str(a) for a in flatten(args)) if n is not None]
            bound_names = [a.expr.name for a in args if isinstance(a, ColumnValue) and isinstance(a.expr, Bound | Ref)]
            return FrameValue(fr.drop(frame, [*names, *bound_names]))
        if name in ("filter", "where"):
            return FrameValue(
                fr.indirect(
                    frame, [self.condition(args[0] if args else kwargs.get("condition"), node)], Subtype.FILTER, site
                )
            )
        if name == "join":
            return FrameValue(self.dataframe_join(frame, args, kwargs, node))
        if name == "crossJoin":
            return FrameValue(fr.join_on(frame, self.frame(args[0] if args else None, node), None, "cross", site))
        if name in ("union", "unionAll", "unionByName"):
            other = self.frame(args[0] if args else kwargs.get("other"), node)
            return FrameValue(fr.union_frames(frame, other, by_name=name == "unionByName", site=site))
        if name in ("intersect", "intersectAll", "subtract", "exceptAll"):
            other = self.frame(args[0] if args else None, node)
            # The other frame's rows decide which rows stay; its columns are not added.
            kept = fr.join_on(frame, other, None, "left_semi", site)
            return FrameValue(_filter_by(kept, other, site))
        if name in ("groupBy", "groupby", "rollup", "cube"):
            return Obj("grouped", frame, exprs=tuple(self.columns(flatten(args), node)))
        if name == "agg":
            return self.grouped_method(Obj("grouped", frame), "agg", args, kwargs, node)
        if name in ("distinct", "dropDuplicates", "drop_duplicates"):
            subset = self.columns(flatten(args), node) if args else fr.all_columns(frame)
            return FrameValue(fr.indirect(frame, subset, Subtype.GROUP_BY, site))
        if name in _SORT_METHODS:
            return FrameValue(fr.indirect(frame, self.columns(flatten(args), node), Subtype.SORT, site))
        if name == "dropna":
            chosen = kwargs.get("subset") or (args[2] if len(args) > 2 else None)
            keys = self.columns(flatten([chosen]), node) if chosen else fr.all_columns(frame)
            return FrameValue(fr.indirect(frame, keys, Subtype.FILTER, site))
        if name == "alias":
            alias = const_str(args[0] if args else kwargs.get("alias"))
            return FrameValue(fr.with_alias(frame, alias) if alias else frame)
        if name in (
            "createOrReplaceTempView",
            "createTempView",
            "createOrReplaceGlobalTempView",
            "createGlobalTempView",
            "registerTempTable",
        ):
            view = const_str(args[0] if args else kwargs.get("name"))
            if view is None:
                self.report(node, "temp view name is not resolved")
            else:
                self.views[view.lower()] = frame
            return Const(None)
        if name == "writeTo":
            return Obj("writer_v2", frame, (("table", args[0] if args else kwargs.get("table", Const(None))),))
        if name == "transform" and args and isinstance(args[0], Function):
            return self.call_function(args[0], [FrameValue(frame), *args[1:]], kwargs, node)
        if name in _PASSTHROUGH_FRAME_METHODS:
            return FrameValue(frame)
        if name in _ACTIONS:
            return self.unknown(node, f"the result of {name}() is only known at run time")
        problem = site.problem(f"DataFrame.{name}() is not analysed")
        return FrameValue(opaque_frame(problem, inputs=frame.inputs))

    def dynamic_frame_method(
        self, frame: Frame, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call
    ) -> Value | None:
        """DynamicFrame methods that differ from DataFrame ones; ``None`` for the rest."""
        site = self.site(node)
        transforms = {
            "apply_mapping": "ApplyMapping",
            "select_fields": "SelectFields",
            "drop_fields": "DropFields",
            "rename_field": "RenameField",
            "resolveChoice": "ResolveChoice",
            "spigot": "Spigot",
            "filter": "Filter",
            "map": "Map",
        }
        if name in transforms:
            return self.glue_transform(transforms[name], [FrameValue(frame), *args], kwargs, node)
        if name == "join":
            bound = self.bind(("paths1", "paths2", "frame2"), args, kwargs)
            return self.glue_transform(
                "Join",
                [
                    FrameValue(frame),
                    bound.get("frame2") or Const(None),
                    bound.get("paths1") or Const(None),
                    bound.get("paths2") or Const(None),
                ],
                {},
                node,
            )
        if name == "write":
            # DynamicFrame.write(connection_type, connection_options, format, ...): a sink like from_options.
            self.options_sink(FrameValue(frame), self.bind(_WRITE_FROM_OPTIONS[1:], args, kwargs), node)
            return FrameValue(frame)
        if name == "relationalize":
            bound = self.bind(("root_table_name", "staging_path", "options"), args, kwargs)
            return self.glue_transform(
                "Relationalize", [FrameValue(frame)], {"name": bound.get("root_table_name", Const(None))}, node
            )
        if name in ("unbox", "unnest", "split_fields", "split_rows", "mergeDynamicFrame"):
            problem = site.problem(f"DynamicFrame.{name}() changes the frame in ways that are not analysed")
            return FrameValue(opaque_frame(problem, inputs=frame.inputs, dynamic=True))
        if name in ("repartition", "coalesce", "errorsAsDynamicFrame"):
            return FrameValue(frame)
        return None

    def dataframe_join(self, frame: Frame, args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Frame:
        site = self.site(node)
        bound = self.bind(("other", "on", "how"), args, kwargs)
        other = self.frame(bound.get("other"), node)
        how = const_str(bound.get("how")) or "inner"
        on = bound.get("on")
        if on is None or (isinstance(on, Const) and on.value is None):
            return fr.join_on(frame, other, None, how, site)
        keys = self.names(on, node)
        if keys is not None:
            return fr.join_using(frame, other, keys, how, site)
        parts = flatten([on])
        if all(isinstance(p, ColumnValue) for p in parts):
            exprs = tuple(p.expr for p in parts if isinstance(p, ColumnValue))
            condition = exprs[0] if len(exprs) == 1 else Call("and", exprs)
            return fr.join_on(frame, other, condition, how, site)
        problem = on.problem if isinstance(on, Unknown) else site.problem("join condition is not resolved")
        return fr.join_on(frame, other, Opaque(problem), how, site)

    def condition(self, value: Value | None, node: ast.AST) -> ColExpr:
        text = const_str(value)
        if text is not None:
            return parse_sql_expression(text, self.site(node))
        return self.column(value, node, strings=False)

    # Columns -----------------------------------------------------------------------------------

    def column(self, value: Value | None, node: ast.AST, *, strings: bool = True) -> ColExpr:
        """A value used as a column: a column expression, or a name when ``strings`` (else a literal)."""
        if isinstance(value, ColumnValue):
            return value.expr
        if isinstance(value, Const):
            if isinstance(value.value, str) and strings:
                return Star() if value.value == "*" else Ref(value.value)
            return Lit(repr(value.value))
        if isinstance(value, Unknown):
            return Opaque(value.problem)
        return Opaque(self.site(node).problem("a column is expected here but the value is not resolved"))

    def columns(self, values: Iterable[Value], node: ast.AST, *, strings: bool = True) -> list[ColExpr]:
        return [self.column(value, node, strings=strings) for value in values]

    def spark_function(self, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call) -> Value:
        site = self.site(node)
        if name in ("col", "column"):
            text = const_str(args[0] if args else kwargs.get("col"))
            if text is None:
                return ColumnValue(self.column(args[0] if args else None, node))
            return ColumnValue(Star() if text == "*" else Ref(text))
        if name in ("lit", "typedLit"):
            return ColumnValue(Lit(repr(literal(args[0])[1]) if args else "NULL"))
        if name == "expr":
            text = const_str(args[0] if args else kwargs.get("str"))
            if text is None:
                return ColumnValue(Opaque(site.problem("F.expr text is not resolved")))
            return ColumnValue(parse_sql_expression(text, site))
        if name == "when":
            condition = self.condition(args[0] if args else kwargs.get("condition"), node)
            value = self.column(args[1] if len(args) > 1 else kwargs.get("value"), node, strings=False)
            return ColumnValue(When((condition,), (value,)))
        if name in ("udf", "pandas_udf"):
            return Obj("udf")
        if name == "broadcast":
            return args[0] if args else self.unknown(node, "broadcast() of nothing")
        flat = flatten(args)
        key = name.lower()
        exprs = []
        for position, argument in enumerate(flat):
            as_name = (
                key in _VARIADIC_COLUMN_FUNCTIONS
                or (position == 0 and key not in _COLUMNS_AFTER_FIRST)
                or (position > 0 and key in _COLUMNS_AFTER_FIRST)
            )
            exprs.append(self.column(argument, node, strings=as_name))
        return ColumnValue(function_call(name, tuple(exprs)))

    def column_method(
        self, expr: ColExpr, name: str, args: list[Value], kwargs: dict[str, Value], node: ast.Call
    ) -> Value:
        if name in ("alias", "name", "as_"):
            alias = const_str(args[0] if args else kwargs.get("alias"))
            return ColumnValue(Alias(expr, alias) if alias else expr)
        if name in ("cast", "astype"):
            target = args[0] if args else kwargs.get("dataType")
            type_name = const_str(target) or (
                target.path.rsplit(".", 1)[-1].removesuffix("()") if isinstance(target, Lib) else "?"
            )
            return ColumnValue(Cast(expr, type_name))
        if name == "over":
            window = args[0] if args else kwargs.get("window")
            spec = window.exprs if isinstance(window, Obj) and window.kind == "window" else ()
            return ColumnValue(Over(expr, spec))
        if name in ("when", "otherwise") and isinstance(expr, When):
            if name == "when":
                condition = self.condition(args[0] if args else None, node)
                value = self.column(args[1] if len(args) > 1 else None, node, strings=False)
                return ColumnValue(When((*expr.conditions, condition), (*expr.values, value)))
            return ColumnValue(
                When(expr.conditions, (*expr.values, self.column(args[0] if args else None, node, strings=False)))
            )
        if name in ("asc", "desc", "asc_nulls_first", "asc_nulls_last", "desc_nulls_first", "desc_nulls_last"):
            return ColumnValue(expr)
        others = tuple(self.column(a, node, strings=False) for a in [*args, *kwargs.values()])
        return ColumnValue(Call(name, (expr, *others)))


def _filter_by(frame: Frame, other: Frame, site: Site) -> Frame:
    """``intersect`` / ``subtract``: the other frame's columns decide which rows stay."""
    keys: list[ColExpr] = [Bound(c.name, c.dependencies) for c in other.columns]
    return fr.indirect(frame, keys, Subtype.FILTER, site)


_STAR_NAMES: dict[str, set[str]] = {
    "awsglue.utils": {"getResolvedOptions"},
    "awsglue.context": {"GlueContext"},
    "awsglue.dynamicframe": {"DynamicFrame", "DynamicFrameCollection"},
    "awsglue.job": {"Job"},
    "pyspark.context": {"SparkContext"},
    "pyspark.sql": {"SparkSession", "Window", "DataFrame"},
}
