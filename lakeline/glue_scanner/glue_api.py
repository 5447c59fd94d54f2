"""The Glue API in a script: ``getResolvedOptions`` (the job's arguments), the GlueContext's sources
and sinks, ``getSink``, the transforms (``ApplyMapping``, ``Join``, ...) and DynamicFrame
methods. A layer of the script interpreter (``script``), apart from the Spark API (``spark_frames``)
built on it, which hands a DynamicFrame's own methods here."""

from __future__ import annotations

import ast
from dataclasses import replace

from lakeline.glue_scanner import frames as fr
from lakeline.glue_scanner import nested
from lakeline.glue_scanner.column_exprs import Ref, parse_sql_expression
from lakeline.glue_scanner.frames import Frame, opaque_frame
from lakeline.glue_scanner.sources_sinks import SourcesAndSinks
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
    literal,
)
from lakeline.lineage.columns.model import Subtype

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

# Parameter names of Glue API calls, for arguments given by position.
_CREATE_FROM_CATALOG = ("database", "table_name", "redshift_tmp_dir", "transformation_ctx", "push_down_predicate")
_CREATE_DATA_FRAME_FROM_CATALOG = ("database", "table_name", "transformation_ctx", "additional_options")
_CREATE_FROM_OPTIONS = ("connection_type", "connection_options", "format", "format_options", "transformation_ctx")
_WRITE_FROM_OPTIONS = ("frame", "connection_type", "connection_options", "format", "format_options")
_WRITE_FROM_CATALOG = ("frame", "database", "table_name", "redshift_tmp_dir", "transformation_ctx")
_WRITE_FROM_JDBC_CONF = ("frame", "catalog_connection", "connection_options", "redshift_tmp_dir", "transformation_ctx")
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


class GlueApi(SourcesAndSinks):
    """Calls of the Glue library and the GlueContext, the transforms and DynamicFrame methods."""

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
