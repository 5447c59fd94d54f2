"""Column lineage from SQL: milliseconds per statement, and agreement with sqllineage and openlineage-sql.

Runs the statements of ``tests/unit/data/column_lineage_cases.yaml`` (Athena, Spark, Hive, Trino and ANSI
dialects) through Lakeline's ``lineage.columns.sql``, sqllineage (given the same table schemas through its
``DummyMetaDataProvider``) and openlineage-sql (``openlineage_sql.parse([...]).column_lineage``).

Agreement is on column-level DIRECT edges, ``(output column, database.table.column)``: the only kind the
other two report. Output columns are named as each library names them, so they are compared on equal
terms: sqllineage names the target table's columns (as Lakeline does for INSERT and CTAS), and reports
nothing for a bare SELECT; openlineage-sql names the SELECT's own output columns, so Lakeline's are
taken from its projections for that comparison. sqllineage is given a bare SELECT as
``INSERT INTO benchmark.query_result SELECT ...``, since it only reports lineage into a written table
(its output columns then take the SELECT's names, as Lakeline's do). sqllineage's ``table.*`` sources (its way of saying
COUNT(*) reads rows) are not columns and are dropped. An output with no name of its own (sqlglot's
``_col_N``, openlineage-sql's ``_N``) is compared as "(unnamed)". A statement a library fails to parse, or for
which it reports no column lineage while Lakeline does, is counted and named.

Usage: ``python -m benchmarks.column_lineage [--repeat N]``; about 10 seconds.
"""

from __future__ import annotations

import argparse
import importlib
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlglot
import yaml

from lakeline.catalog_json import CatalogFile
from lakeline.lineage.columns.model import StatementLineage, TransformationType
from lakeline.lineage.columns.sql import SqlColumnLineage, sqlglot_dialect

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "unit" / "data" / "column_lineage_cases.yaml"
CATALOG = ROOT / "tests" / "unit" / "data" / "column_lineage_catalog.json"
DEFAULT_DATABASE = "sales"
SELECT_TARGET = "benchmark.query_result"
UNNAMED = "(unnamed)"
# sqllineage's names (sqlfluff's) for the dialects Lakeline reads.
SQLLINEAGE_DIALECTS = {"athena": "athena", "spark": "sparksql", "hive": "hive", "trino": "trino", "ansi": "ansi"}

Edges = set[tuple[str, str]]


@dataclass
class Case:
    id: str
    dialect: str
    sql: str


@dataclass
class LibraryResult:
    name: str
    timings_ms: list[float] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    silent: list[str] = field(default_factory=list)
    exact: int = 0
    compared: int = 0
    shared_edges: int = 0
    their_edges: int = 0
    our_edges: int = 0
    differences: list[tuple[str, Edges, Edges]] = field(default_factory=list)


def _direct_edges(lineage: StatementLineage, *, by_query_name: bool, dialect: str) -> Edges:
    edges: Edges = set()
    for column in lineage.columns:
        name = column.name
        if by_query_name and column.expression and lineage.sql.split(maxsplit=1)[0].upper() in ("SELECT", "WITH"):
            name = sqlglot.parse_one(column.expression, read=sqlglot_dialect(dialect)).alias_or_name.lower()
            name = UNNAMED if re.fullmatch(r"_col_\d+", name) else name
        for edge in column.dependencies:
            if edge.transformation.type is TransformationType.DIRECT:
                edges.add((name, str(edge.source)))
    return edges


def _time(function: Callable[[], Any], repeat: int) -> tuple[Any, float]:
    result = function()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        samples.append((time.perf_counter() - start) * 1000)
    return result, statistics.median(samples)


def _sqllineage(case: Case, metadata: dict[str, list[str]], *, bare_select: bool) -> Callable[[], Edges]:
    runner_module = importlib.import_module("sqllineage.runner")
    dummy = importlib.import_module("sqllineage.core.metadata.dummy")
    provider = dummy.DummyMetaDataProvider(metadata)
    dialect = SQLLINEAGE_DIALECTS[case.dialect]
    # sqllineage reports column lineage only into a written table: a bare SELECT is given one.
    sql = f"INSERT INTO {SELECT_TARGET} {case.sql}" if bare_select else case.sql

    def run() -> Edges:
        runner = runner_module.LineageRunner(sql, dialect=dialect, metadata_provider=provider, silent_mode=True)
        edges: Edges = set()
        for path in runner.get_column_lineage():
            source, target = path[0], path[-1]
            if source.raw_name == "*":
                continue
            edges.add((target.raw_name.lower(), str(source).lower()))
        return edges

    return run


def _openlineage_sql(case: Case) -> Callable[[], Edges]:
    module = importlib.import_module("openlineage_sql")
    dialect = "hive" if case.dialect in ("spark", "hive") else "generic"

    def run() -> Edges:
        result = module.parse([case.sql], dialect=dialect, default_schema=DEFAULT_DATABASE)
        if result.errors:
            raise ValueError(str(result.errors[0]))
        edges: Edges = set()
        for column in result.column_lineage:
            for source in column.lineage:
                origin = str(source.origin).lower() if source.origin else "?"
                name = column.descendant.name.lower()
                name = UNNAMED if re.fullmatch(r"_\d+", name) else name
                edges.add((name, f"{origin}.{source.name.lower()}"))
        return edges

    return run


def _compare(result: LibraryResult, case: Case, ours: Edges, run: Callable[[], Edges], repeat: int) -> None:
    try:
        theirs, elapsed = _time(run, repeat)
    except Exception as error:
        result.failed.append(f"{case.id} ({type(error).__name__}: {str(error).splitlines()[0][:70]})")
        return
    result.timings_ms.append(elapsed)
    if not theirs and ours:
        result.silent.append(case.id)
    result.compared += 1
    result.exact += theirs == ours
    if theirs != ours:
        result.differences.append((case.id, theirs - ours, ours - theirs))
    result.shared_edges += len(theirs & ours)
    result.their_edges += len(theirs)
    result.our_edges += len(ours)


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:5.1f}%" if whole else "   n/a"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per statement and library")
    parser.add_argument("--differences", action="store_true", help="print each statement's differing edges")
    args = parser.parse_args(argv)

    catalog = CatalogFile.load(CATALOG)
    metadata = {
        f"{t.database}.{t.table}": [c.name for c in (*t.columns, *t.partition_columns)] for t in catalog.tables()
    }
    cases = [Case(c["id"], c["dialect"], c["sql"]) for c in yaml.safe_load(CASES.read_text())]

    ours_ms: list[float] = []
    sqllineage = LibraryResult("sqllineage")
    openlineage_sql = LibraryResult("openlineage-sql")
    for case in cases:

        def analyse(case: Case = case) -> StatementLineage:
            analyser = SqlColumnLineage(catalog, dialect=case.dialect, default_database=DEFAULT_DATABASE)
            (lineage,) = analyser.statements(case.sql)
            return lineage

        lineage, elapsed = _time(analyse, args.repeat)
        ours_ms.append(elapsed)
        by_target = _direct_edges(lineage, by_query_name=False, dialect=case.dialect)
        by_query = _direct_edges(lineage, by_query_name=True, dialect=case.dialect)
        bare_select = lineage.target is None
        _compare(sqllineage, case, by_target, _sqllineage(case, metadata, bare_select=bare_select), args.repeat)
        _compare(openlineage_sql, case, by_query, _openlineage_sql(case), args.repeat)

    ours = statistics.mean(ours_ms)
    print(f"Column lineage of {len(cases)} statements ({CASES.relative_to(ROOT)}), median of {args.repeat} runs each\n")
    header = ("ms/statement", 12), ("time ratio", 12), ("parsed", 8), ("exact", 8), ("precision", 10), ("recall", 8)
    print(f"{'library':<16} " + " ".join(f"{title:>{width}}" for title, width in header))
    print(f"{'lakeline':<16} {ours:12.2f} {'1.00x':>12} {len(cases):>8}")
    for result in (sqllineage, openlineage_sql):
        mean = statistics.mean(result.timings_ms) if result.timings_ms else float("nan")
        print(
            f"{result.name:<16} {mean:12.2f} {mean / ours:11.2f}x {result.compared:>8} "
            f"{_percent(result.exact, len(cases)):>8} {_percent(result.shared_edges, result.their_edges):>10} "
            f"{_percent(result.shared_edges, result.our_edges):>8}"
        )
    slowest = max(range(len(cases)), key=ours_ms.__getitem__)
    print(f"\nlakeline's slowest statement: {cases[slowest].id}, {ours_ms[slowest]:.2f} ms")
    print(
        "exact: statements whose DIRECT (output, input column) edges equal Lakeline's, of all statements;"
        "\nprecision / recall: the library's edges also found by Lakeline / Lakeline's edges the library found."
    )
    for result in (sqllineage, openlineage_sql):
        failed, silent = len(result.failed), len(result.silent)
        print(f"\n{result.name}: {failed} statement(s) not parsed, {silent} without column lineage")
        for item in result.failed:
            print(f"  not parsed: {item}")
        if result.silent:
            print(f"  no column lineage: {', '.join(result.silent)}")
        if args.differences:
            for case_id, only_theirs, only_ours in result.differences:
                print(f"  {case_id}: only {result.name} {sorted(only_theirs)}; only lakeline {sorted(only_ours)}")


if __name__ == "__main__":
    main()
