"""The Spark API in a script: ``spark.sql`` and ``spark.table``, readers and writers, DataFrame
methods, grouped data and RDDs, each followed to the frame (with its column lineage) it gives or the
dataset it writes. A layer of the script interpreter (``script``), over the Glue API (``glue_api``)."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import replace

from lakeline.glue_scanner import frames as fr
from lakeline.glue_scanner.column_exprs import (
    Alias,
    Bound,
    Call,
    ColExpr,
    Opaque,
    Ref,
    Site,
    Star,
    function_call,
    parse_sql_expression,
)
from lakeline.glue_scanner.frames import Frame, opaque_frame
from lakeline.glue_scanner.glue_api import GlueApi
from lakeline.glue_scanner.script_analysis import Write
from lakeline.glue_scanner.spark_sql import run_spark_sql
from lakeline.glue_scanner.values import (
    ColumnValue,
    Const,
    Dict,
    FrameValue,
    Function,
    Obj,
    Seq,
    Unknown,
    Value,
    const_str,
    flatten,
)
from lakeline.lineage.columns.model import OutputColumn, Subtype, identity_of

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


class SparkFrames(GlueApi):
    """The SparkSession, readers and writers, DataFrame methods, grouped data and RDDs."""

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

    def rdd_method(self, frame: Frame, name: str, node: ast.Call) -> Value:
        """``df.rdd.map(...)``: the rows are not followed, but the datasets they come from are."""
        if name == "toDF":
            return FrameValue(frame)
        problem = self.site(node).problem(f"RDD.{name}() changes rows in ways that are not analysed")
        return Obj("rdd", opaque_frame(problem, inputs=frame.inputs))


def _filter_by(frame: Frame, other: Frame, site: Site) -> Frame:
    """``intersect`` / ``subtract``: the other frame's columns decide which rows stay."""
    keys: list[ColExpr] = [Bound(c.name, c.dependencies) for c in other.columns]
    return fr.indirect(frame, keys, Subtype.FILTER, site)
