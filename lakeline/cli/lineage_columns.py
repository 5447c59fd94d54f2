"""``lakeline lineage sql | tree``: column lineage of a SQL file, as an OpenLineage RunEvent or as trees.

- ``sql FILE --catalog get-tables.json`` prints one RunEvent (JSON) whose outputs carry the
  ``columnLineage`` facet; ``--emit`` also sends it through the configured OpenLineage transport
  (``openlineage.yml`` / ``OPENLINEAGE_*``), which by default is none.
- ``tree FILE --catalog get-tables.json`` prints, for each output column, where it comes from, and with
  ``--events`` (stored events of earlier jobs) follows it further back, to raw columns.
- ``column DATABASE.TABLE.COLUMN --events PATH`` follows a column the pipeline wrote back to raw columns
  through stored events alone (the local ``lineage/openlineage.jsonl``, or the archive's ``openlineage/``
  folder after ``aws s3 sync``).

Exit codes: 0 success; 1 the SQL, the catalog or the events are not acceptable; 2 a configuration error.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from openlineage.client.event_v2 import RunState
from rich.console import Console

from lakeline.catalog_json import CatalogFile
from lakeline.console import EXIT_FAILED, fail
from lakeline.errors import ConfigError, LakelineError
from lakeline.lineage.columns.model import StatementLineage
from lakeline.lineage.columns.sql import DIALECTS
from lakeline.lineage.openlineage.config import OpenLineageSettings, load_openlineage_settings
from lakeline.lineage.openlineage.emitter import LineageEmitter
from lakeline.lineage.openlineage.events import StepRun, event_to_dict, new_run_id, now, run_event, sql_step_run
from lakeline.lineage.openlineage.naming import glue_dump_naming, table_of
from lakeline.lineage.viewer.column_graph import ColumnGraph, FieldRef, load_events, render_tree
from lakeline.lineage.viewer.column_tree import column_tree

_err = Console(stderr=True)

FileArgument = Annotated[Path, typer.Argument(help="SQL file: one or more statements")]
DialectOption = Annotated[str, typer.Option(help=f"SQL dialect: {' or '.join(DIALECTS)}")]
CatalogOption = Annotated[Path, typer.Option(help="'aws glue get-tables' JSON with the tables the SQL reads")]
DatabaseOption = Annotated[str | None, typer.Option(help="database of tables the SQL names without one")]
NamespaceOption = Annotated[
    str | None,
    typer.Option(
        help="dataset namespace (default: from config, else Athena's of AWS_REGION / AWS_DEFAULT_REGION, "
        "else 'lakeline-local://spark')"
    ),
]
EventsOption = Annotated[
    list[Path] | None,
    typer.Option("--events", help="stored RunEvents to follow back through: JSON lines, a JSON array, or a folder"),
]


def _settings(overrides: dict[str, str | None], catalog: CatalogFile) -> OpenLineageSettings:
    """The configured settings, with the catalog dump's tables named as ``glue lineage`` names them
    (``naming.glue_dump_naming``): the dump's region is the AWS CLI's, from the environment."""
    settings = load_openlineage_settings(os.environ, cwd=Path.cwd(), home=Path.home(), overrides=overrides)
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    naming = glue_dump_naming(
        settings.dataset_namespace,
        settings.glue_catalog,
        region=region,
        catalog_ids=catalog.catalog_ids,
        namespace_given=overrides.get("datasetNamespace") is not None,
    )
    return replace(settings, dataset_namespace=naming.namespace, glue_catalog=naming.glue_catalog)


def _step(
    file: Path,
    *,
    dialect: str,
    catalog: CatalogFile,
    database: str | None,
    settings: OpenLineageSettings,
    job_name: str | None = None,
    run_id: str | None = None,
) -> StepRun:
    if dialect not in DIALECTS:
        fail(f"--dialect {dialect!r} is not supported: use {' or '.join(DIALECTS)}")
    try:
        sql = file.read_text(encoding="utf-8")
    except OSError as error:
        fail(f"cannot read {file}: {error.strerror}")
    step = sql_step_run(
        sql,
        catalog=catalog,
        job_name=job_name or file.stem,
        run_id=run_id or new_run_id(),
        settings=settings,
        dialect=dialect,
        default_database=database,
    )
    if not step.statements:
        # An event with no datasets would read as "this SQL has no lineage"; say what happened instead.
        fail(
            f"{file} has no statement that reads or writes rows (only DROP, ALTER, MSCK, ...): no lineage",
            code=EXIT_FAILED,
        )
    return step


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""

    @app.command("sql", short_help="Print one OpenLineage RunEvent for FILE, with its column lineage.")
    def sql_command(
        file: FileArgument,
        catalog: CatalogOption,
        dialect: DialectOption = "athena",
        database: DatabaseOption = None,
        dataset_namespace: NamespaceOption = None,
        job_namespace: Annotated[str | None, typer.Option(help="job namespace (default: 'lakeline')")] = None,
        job_name: Annotated[str | None, typer.Option(help="job name (default: the file's name)")] = None,
        run_id: Annotated[str | None, typer.Option(help="run id, a UUID (default: a new one)")] = None,
        parent_job_name: Annotated[str | None, typer.Option(help="parent run's job (the pipeline)")] = None,
        parent_run_id: Annotated[str | None, typer.Option(help="parent run's id, a UUID")] = None,
        event_type: Annotated[str, typer.Option(help="START, COMPLETE or FAIL")] = "COMPLETE",
        emit: Annotated[bool, typer.Option(help="also send it through the configured transport")] = False,
    ) -> None:
        """Print one OpenLineage RunEvent for FILE with the column lineage of every table it writes."""
        try:
            state = RunState(event_type.upper())
        except ValueError:
            fail(f"--event-type {event_type!r} must be START, COMPLETE or FAIL")
        try:
            tables = CatalogFile.load(catalog)
            settings = _settings(
                {
                    "namespace": job_namespace,
                    "datasetNamespace": dataset_namespace,
                    "parentJobName": parent_job_name,
                    "parentRunId": parent_run_id,
                },
                tables,
            )
            step = _step(
                file,
                dialect=dialect,
                catalog=tables,
                database=database,
                settings=settings,
                job_name=job_name,
                run_id=run_id,
            )
            event = run_event(step, state, at=now(), error="failed" if state is RunState.FAIL else None)
            if emit:
                emitter = LineageEmitter(settings)
                emitter.emit(event)
                emitter.close()
                if not emitter.sends_events:
                    _err.print("note: no OpenLineage transport is configured; nothing was sent", highlight=False)
        except ConfigError as error:
            fail(str(error))
        except (LakelineError, ValueError) as error:
            fail(str(error), code=EXIT_FAILED)
        sys.stdout.write(json.dumps(event_to_dict(event), indent=2) + "\n")

    @app.command("tree", short_help="Print a tree per output column of FILE, down to table columns and literals.")
    def tree_command(
        file: FileArgument,
        catalog: CatalogOption,
        dialect: DialectOption = "athena",
        database: DatabaseOption = None,
        dataset_namespace: NamespaceOption = None,
        events: EventsOption = None,
        direct_only: Annotated[bool, typer.Option(help="leave out INDIRECT inputs")] = False,
        engine: Annotated[
            str, typer.Option(help="'sql': from the SQL text; 'spark': from Spark's analyzed plan (starts Spark)")
        ] = "sql",
    ) -> None:
        """Print an Ushas-style tree per output column of FILE: its expression chain down to table columns
        and literals, followed back through --events."""
        if engine not in ("sql", "spark"):
            fail(f"--engine {engine!r} must be sql or spark")
        try:
            tables = CatalogFile.load(catalog)
            settings = _settings({"datasetNamespace": dataset_namespace}, tables)
            step = _step(file, dialect=dialect, catalog=tables, database=database, settings=settings)
            statements: list[StatementLineage] = list(step.statements)
            refused: list[str] = []
            if engine == "spark":
                from lakeline.lineage.columns.spark_catalog import Refused, spark_statements

                sql = file.read_text(encoding="utf-8")
                read = spark_statements(sql, tables, dialect=dialect, default_database=database)
                statements = [item for item in read if not isinstance(item, Refused)]
                refused = [f"statement {r.position}: {r.reason}" for r in read if isinstance(r, Refused)]
            stored = [event for path in events or [] for event in load_events(path)]
            this_run = event_to_dict(run_event(step, RunState.COMPLETE, at=now()))
            graph = ColumnGraph.from_events([*stored, this_run])
        except ConfigError as error:
            fail(str(error))
        except LakelineError as error:
            fail(str(error), code=EXIT_FAILED)
        naming = step.naming
        blocks = []
        for index, statement in enumerate(statements, start=1):
            namespace, output = (
                naming.of(statement.target) if statement.target else (naming.namespace, f"query_{index}")
            )
            for column in statement.columns:
                ref = FieldRef(namespace, output, column.name)
                tree = column_tree(ref, column, graph, naming, indirect=not direct_only, dataset=statement.dataset)
                title = f"{ref}" + (f" = {column.expression}" if column.expression else "")
                blocks.append(render_tree(tree, title=title))
        sys.stdout.write("\n\n".join(blocks) + ("\n" if blocks else ""))
        if refused:
            # The trees Spark's plans give are printed; each statement they leave out says why, on one line.
            sys.stdout.flush()
            fail(f"{len(refused)} statement(s) without lineage from Spark's plan", code=EXIT_FAILED, problems=refused)

    @app.command("column", short_help="Print one column's tree from stored events, back to raw columns.")
    def column_command(
        column: Annotated[str, typer.Argument(help="DATABASE.TABLE.COLUMN to follow back")],
        events: Annotated[
            list[Path], typer.Option("--events", help="stored RunEvents: JSON lines, a JSON array, or a folder")
        ],
        dataset_namespace: Annotated[
            str | None, typer.Option(help="follow only the column of this dataset namespace (default: any)")
        ] = None,
        direct_only: Annotated[bool, typer.Option(help="leave out INDIRECT inputs")] = False,
    ) -> None:
        """Print the tree of one column from stored events: every job that wrote it, back to raw columns."""
        parts = column.split(".")
        if len(parts) != 3 or not all(parts):
            fail(f"column {column!r} must be written DATABASE.TABLE.COLUMN")
        dataset, field = f"{parts[0]}.{parts[1]}", parts[2]
        try:
            graph = ColumnGraph.from_events(event for path in events for event in load_events(path))
        except LakelineError as error:
            fail(str(error), code=EXIT_FAILED)
        known = [ref for ref in graph.fields if table_of(ref.dataset) == dataset and ref.field == field]
        if dataset_namespace is not None:
            known = [ref for ref in known if ref.namespace == dataset_namespace]
        if not known:
            where = f" in namespace {dataset_namespace}" if dataset_namespace else ""
            fail(f"no stored event writes {column}{where}", code=EXIT_FAILED)
        blocks = [render_tree(graph.tree(ref, indirect=not direct_only), title=str(ref)) for ref in known]
        sys.stdout.write("\n\n".join(blocks) + "\n")
