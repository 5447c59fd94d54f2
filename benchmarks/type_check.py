"""The engine's type check of a CSV file (``stage_a.type_check``, #39) on local Spark: seconds for a
``--megabytes`` CSV file (default 100; the door benchmark's columns: BIGINT, STRING, DECIMAL, DATE) through
the run's check (make the text table, the check query, drop it), against the baseline of the same
process: the run's CTAS of the same file into Parquet, which reads every value anyway. Each is run
``--repeat`` times (default 2) after a warm-up on a small file; the best is printed. Rows: the check as
the embedded runtime runs it (Spark 3.5's semantics, Spark's own CSV reader), as the local Athena's
semantics run it (ANSI), and the CTAS.

    .venv/bin/python -m benchmarks.type_check [--megabytes 100] [--repeat 2]
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks.door import COLUMNS, write_csv
from lakeline.engines.base import TableSchema
from lakeline.engines.spark import SparkEngine
from lakeline.engines.spark_semantics import ATHENA
from lakeline.names import ddl_name, dml_name, string_literal
from stage_a.run import check_types
from stage_a.type_check import TypeCheck, plan_type_check

DATABASE = "type_check_benchmark"


def _check(folder: Path, name: str, *, multiline: bool) -> TypeCheck:
    schema = TableSchema(DATABASE, "sales", COLUMNS, format="csv", multiline_fields=multiline)
    check = plan_type_check(schema, database=DATABASE, temp_table=f"t_{name}", location=folder.as_uri())
    assert check is not None
    return check


def _ctas(engine: SparkEngine, folder: Path, out: Path, name: str) -> Callable[[], None]:
    def run() -> None:
        check = _check(folder, name, multiline=True)
        with contextlib.suppress(Exception):
            engine.execute(check.drop)
        engine.session.sql(check.create)
        target = out / f"{name}-{time.monotonic_ns()}"
        columns = ", ".join(f"CAST({dml_name(c.name)} AS {c.type.upper()}) AS {dml_name(c.name)}" for c in COLUMNS)
        engine.execute(
            f"CREATE TABLE {dml_name(DATABASE, 'ctas_' + name)} WITH (format = 'PARQUET', "
            f"external_location = {string_literal(target.as_uri() + '/')}) AS SELECT {columns} "
            f"FROM {dml_name(DATABASE, check.table)}"
        )
        engine.execute(f"DROP TABLE IF EXISTS {ddl_name(DATABASE, 'ctas_' + name)}")
        engine.execute(check.drop)

    return run


def _best(run: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


@contextlib.contextmanager
def _engine(workspace: Path) -> Iterator[SparkEngine]:
    engine = SparkEngine.local(workspace, master="local[2]", shuffle_partitions=4, driver_memory="2g")
    try:
        engine.execute(f"CREATE DATABASE IF NOT EXISTS {ddl_name(DATABASE)}")
        yield engine
    finally:
        engine.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        small, large = root / "small", root / "large"
        small.mkdir()
        large.mkdir()
        write_csv(small / "s.csv", 1_000_000, moved=False)
        write_csv(large / "l.csv", args.megabytes * 1_000_000, moved=False)
        size = (large / "l.csv").stat().st_size
        with _engine(root / "workspace") as engine:

            def checked(folder: Path, name: str, *, multiline: bool, athena: bool) -> Callable[[], None]:
                def run() -> None:
                    check = _check(folder, name, multiline=multiline)
                    if athena:
                        with engine.imposed(ATHENA):
                            check_types(check, engine, DATABASE)
                    else:
                        check_types(check, engine, DATABASE)

                return run

            rows: list[tuple[str, float]] = []
            for label, multiline, athena in (
                ("type check (embedded: Spark's CSV reader)", True, False),
                ("type check (Athena's DDL: OpenCSVSerde; ANSI)", False, True),
            ):
                checked(small, "warm", multiline=multiline, athena=athena)()
                rows.append((label, _best(checked(large, "large", multiline=multiline, athena=athena), args.repeat)))
            _ctas(engine, small, root / "out", "warm")()
            rows.append(
                (
                    "baseline: the run's CTAS of the file",
                    _best(_ctas(engine, large, root / "out", "large"), args.repeat),
                )
            )
    table = Table(
        title=f"The engine's type check of one {size / 1e6:.0f} MB CSV file (local[2], best of {args.repeat})"
    )
    table.add_column("what")
    table.add_column("seconds", justify="right")
    table.add_column("MB/s", justify="right")
    table.add_column("vs CTAS", justify="right")
    baseline = rows[-1][1]
    for label, seconds in rows:
        table.add_row(label, f"{seconds:.1f}", f"{size / 1e6 / seconds:.1f}", f"{seconds / baseline:.2f}")
    Console().print(table)


if __name__ == "__main__":
    main()
