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

This module holds the entry point and the hooks that hand each kind of value to its part; the
interpreter is built in layers, each a class over the one before: ``python_eval`` (plain Python),
``spark_columns``, ``sources_sinks``, ``glue_api``, ``spark_frames``, and the hooks here.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from lakeline.errors import InvalidInputError
from lakeline.glue_scanner import frames as fr
from lakeline.glue_scanner.column_exprs import Bound, Call
from lakeline.glue_scanner.frames import opaque_frame
from lakeline.glue_scanner.glue_api import GLUE_TRANSFORMS
from lakeline.glue_scanner.py2 import convert_python2
from lakeline.glue_scanner.script_analysis import ScriptAnalysis, ScriptContext
from lakeline.glue_scanner.spark_frames import SparkFrames
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
    const_str,
    flatten,
)
from lakeline.lineage.columns.model import Subtype


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


class _GlueScriptInterpreter(SparkFrames):
    """The Glue and Spark API over ``PythonEvaluator``: frames, columns, sources and sinks."""

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


_STAR_NAMES: dict[str, set[str]] = {
    "awsglue.utils": {"getResolvedOptions"},
    "awsglue.context": {"GlueContext"},
    "awsglue.dynamicframe": {"DynamicFrame", "DynamicFrameCollection"},
    "awsglue.job": {"Job"},
    "pyspark.context": {"SparkContext"},
    "pyspark.sql": {"SparkSession", "Window", "DataFrame"},
}
