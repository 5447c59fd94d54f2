"""Every format Lakeline accepts, on both runtimes (#36): one generated project whose tables are the matrix's
cases, run once with ``lakeline run`` (the local deployment: the DDL Lakeline writes for AWS, run by the
local Athena) and once with ``lakeline run --embedded``, then read back with ``lakeline sql``.

Each raw table is one case of raw format (CSV through OpenCSVSerde, JSON lines through the OpenX JSON SerDe,
Parquet) x compressed or not (``.gz`` text, GZIP pages in Parquet) x partitioned or not; each stage table
is written in one of the stage formats (Parquet, ORC, JSON, TEXTFILE through LazySimpleSerDe), compressed
or not, so every stage format and compression is met by partitioned and unpartitioned tables. Both runtimes
must give exactly the rows the files hold, in the raw tables and in the stage tables.
"""

from __future__ import annotations

import gzip
import json
import os
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_generated_project import BINARY, I32, I64, LIST, STRUCT, _int, _list, _struct, _text

# Two runs of a project of twelve tables, one on each runtime, on a busy machine.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]

TEAM, DATASET = "fmt", "matrix"
RAW_DB, STAGE_DB = f"{TEAM}_{DATASET}_raw_dev", f"{TEAM}_{DATASET}_dev"
DAYS = ("2024-03-01", "2024-03-02")
RAW_FORMATS = ("csv", "json", "parquet")
# Every stage format, compressed and not; the cases take them in turn.
STAGE_FORMATS = [
    ("PARQUET", "GZIP"),
    ("ORC", "ZLIB"),
    ("JSON", "GZIP"),
    ("TEXTFILE", "GZIP"),
    ("PARQUET", "NONE"),
    ("ORC", "NONE"),
    ("JSON", "NONE"),
    ("TEXTFILE", "NONE"),
]
Row = tuple[int, str, float]


def cases() -> list[tuple[str, str, bool, bool]]:
    """(table, raw format, compressed, partitioned) of each case."""
    return [
        (f"{kind}_{'gz' if compressed else 'plain'}_{'days' if partitioned else 'flat'}", kind, compressed, partitioned)
        for kind in RAW_FORMATS
        for compressed in (False, True)
        for partitioned in (False, True)
    ]


def stage_formats() -> dict[str, tuple[str, str]]:
    """Each case's stage format: the partitioned and the unpartitioned cases each go round the list."""
    chosen: dict[str, tuple[str, str]] = {}
    for partitioned, offset in ((False, 0), (True, 3)):
        tables = [table for table, _, _, split in cases() if split == partitioned]
        for index, table in enumerate(tables):
            chosen[table] = STAGE_FORMATS[(index + offset) % len(STAGE_FORMATS)]
    return chosen


def file_rows(table_index: int, file_index: int) -> list[Row]:
    """Distinct rows for each file; an item with a comma and one with a non-ASCII letter, amounts with
    decimals (so CSV's are read as doubles)."""
    base = 100 * table_index + 10 * file_index
    items = ["tea, green", "café", "cake"]
    return [(base + n, items[n % 3], round(1.25 * (n + 1) + file_index, 2)) for n in range(2 + file_index)]


# --- the files -------------------------------------------------------------------------------------------

INT64, DOUBLE, BYTE_ARRAY = 2, 5, 6  # parquet.thrift's physical types
UTF8, REQUIRED, PLAIN, RLE, UNCOMPRESSED, GZIP_CODEC = 0, 0, 0, 3, 0, 2


def parquet_bytes(rows: list[Row], *, compressed: bool) -> bytes:
    """One row group of ``id`` (int64), ``item`` (UTF8) and ``amount`` (double), all required, PLAIN pages,
    GZIP-compressed when asked (pandas and pyarrow are not installed; see ``test_generated_project``)."""
    columns: list[tuple[str, int, bytes]] = [
        ("id", INT64, b"".join(struct.pack("<q", r[0]) for r in rows)),
        ("item", BYTE_ARRAY, b"".join(struct.pack("<I", len(t := r[1].encode())) + t for r in rows)),
        ("amount", DOUBLE, b"".join(struct.pack("<d", r[2]) for r in rows)),
    ]
    body = bytearray(b"PAR1")
    schema = [_struct((4, BINARY, _text("schema")), (5, I32, _int(len(columns))))]
    chunks: list[bytes] = []
    for name, kind, data in columns:
        described = [(1, I32, _int(kind)), (3, I32, _int(REQUIRED)), (4, BINARY, _text(name))]
        if kind == BYTE_ARRAY:
            described.append((6, I32, _int(UTF8)))
        schema.append(_struct(*described))
        stored = gzip.compress(data) if compressed else data
        page = _struct((1, I32, _int(len(rows))), (2, I32, _int(PLAIN)), (3, I32, _int(RLE)), (4, I32, _int(RLE)))
        header = _struct((1, I32, _int(0)), (2, I32, _int(len(data))), (3, I32, _int(len(stored))), (5, STRUCT, page))
        offset = len(body)
        body += header + stored
        metadata = _struct(
            (1, I32, _int(kind)),
            (2, LIST, _list(I32, [_int(PLAIN), _int(RLE)])),
            (3, LIST, _list(BINARY, [_text(name)])),
            (4, I32, _int(GZIP_CODEC if compressed else UNCOMPRESSED)),
            (5, I64, _int(len(rows))),
            (6, I64, _int(len(header) + len(data))),
            (7, I64, _int(len(header) + len(stored))),
            (9, I64, _int(offset)),
        )
        chunks.append(_struct((2, I64, _int(offset)), (3, STRUCT, metadata)))
    group = _struct((1, LIST, _list(STRUCT, chunks)), (2, I64, _int(len(body) - 4)), (3, I64, _int(len(rows))))
    footer = _struct(
        (1, I32, _int(1)),
        (2, LIST, _list(STRUCT, schema)),
        (3, I64, _int(len(rows))),
        (4, LIST, _list(STRUCT, [group])),
    )
    return bytes(body) + footer + struct.pack("<I", len(footer)) + b"PAR1"


def file_bytes(kind: str, rows: list[Row], *, compressed: bool) -> tuple[str, bytes]:
    """The file's name suffix and bytes."""
    if kind == "parquet":
        return ".parquet", parquet_bytes(rows, compressed=compressed)
    if kind == "csv":
        text = "id,item,amount\r\n" + "".join(f'{i},"{item}",{amount}\r\n' for i, item, amount in rows)
    else:
        text = "".join(json.dumps({"id": i, "item": item, "amount": amount}) + "\n" for i, item, amount in rows)
    data = text.encode()
    return (f".{kind}.gz", gzip.compress(data)) if compressed else (f".{kind}", data)


def read_file(path: Path) -> list[Row]:
    """The rows a text file holds, read back with Python's own readers (Parquet: none here; its rows are
    the ones it was written from, checked by ``test_the_parquet_writer_s_pages_are_what_was_asked``)."""
    data = path.read_bytes()
    text = (gzip.decompress(data) if path.name.endswith(".gz") else data).decode()
    if ".csv" in path.name:
        import csv

        records = list(csv.DictReader(text.splitlines()))
    else:
        records = [json.loads(line) for line in text.splitlines()]
    return [(int(r["id"]), str(r["item"]), float(r["amount"])) for r in records]


def write_project(root: Path) -> dict[tuple[str, str], list[Row]]:
    """The project's files and ``lakeline.yml``; the rows of each (table, day) (day ``""``: unpartitioned)."""
    expected: dict[tuple[str, str], list[Row]] = {}
    for index, (table, kind, compressed, partitioned) in enumerate(cases()):
        # One file per table: each case costs one stage A execution of the local deployment.
        day = DAYS[index // 2 % len(DAYS)]
        rows = file_rows(index, 1)
        suffix, data = file_bytes(kind, rows, compressed=compressed)
        folder = root / "incoming" / TEAM / DATASET / table / (f"day={day}" if partitioned else "")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"part{suffix}"
        path.write_bytes(data)
        if kind != "parquet":
            assert read_file(path) == rows, path
        expected[(table, day if partitioned else "")] = rows
    settings = {
        f"{STAGE_DB}.{table}": {"format": kind, "compression": compression}
        for table, (kind, compression) in stage_formats().items()
    }
    config = {"workspace": ".lakeline", "raw": "incoming", "environment": "dev", "tables_settings": settings}
    (root / "lakeline.yml").write_text(json.dumps(config, indent=2))  # JSON is YAML
    return expected


# --- running lakeline -----------------------------------------------------------------------------------


def start(project: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "lakeline", *args, "--config", "lakeline.yml"],
        cwd=project,
        env={**os.environ, "COLUMNS": "200"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        stdout, stderr = process.communicate(timeout=1200)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def together(*commands: tuple[Path, tuple[str, ...]]) -> list[subprocess.CompletedProcess[str]]:
    """The commands (each a project and its arguments) run at once, their results in the same order: each run
    spends much of its time waiting (on Spark's JVM, on the ASL interpreter, on the local endpoint), so two
    at once take far less than one after the other."""
    started = [start(project, *args) for project, args in commands]
    try:
        with ThreadPoolExecutor(len(started)) as pool:  # each one's pipes read while it runs
            return list(pool.map(finish, started))
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait()


def everything_query() -> str:
    """Every row of every raw and stage table of the matrix, in one statement."""
    parts = []
    for table, _, _, partitioned in cases():
        day = "day" if partitioned else "''"
        for layer, database in (("raw", RAW_DB), ("stage", STAGE_DB)):
            parts.append(
                f"SELECT '{layer}' AS layer, '{table}' AS tbl, {day} AS day, id, item, amount FROM {database}.{table}"
            )
    return " UNION ALL ".join(parts)


def table_contents(result: subprocess.CompletedProcess[str]) -> dict[tuple[str, str, str], list[Row]]:
    """The rows ``lakeline sql --format json`` of ``everything_query`` gave, by (layer, table, day)."""
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    found: dict[tuple[str, str, str], list[Row]] = {}
    for row in json.loads(result.stdout):
        key = (row["layer"], row["tbl"], row["day"])
        found.setdefault(key, []).append((int(row["id"]), str(row["item"]), float(row["amount"])))
    return {key: sorted(rows) for key, rows in found.items()}


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The project written once, copied, and run on each runtime, then read back with ``lakeline sql`` on each
    (one run and one read each, shared by the checks; the two runtimes at once)."""
    base = tmp_path_factory.mktemp("format-matrix")
    expected = write_project(base / "template")
    runtimes = {"deployed": ("run",), "embedded": ("run", "--embedded")}
    for runtime in runtimes:
        subprocess.run(["cp", "-r", str(base / "template"), str(base / runtime)], check=True)
    ran = together(*((base / runtime, args) for runtime, args in runtimes.items()))
    read = ("sql", "--no-server", "--format", "json", "-q", everything_query())
    # A run that failed is reported by the checks (its read back fails too, or finds other rows).
    read_back = together(*((base / runtime, read) for runtime in runtimes))
    runs: dict[str, Any] = {"expected": expected}
    for runtime, result, contents in zip(runtimes, ran, read_back, strict=True):
        runs[runtime] = (base / runtime, result, contents)
    yield runs


def expected_contents(expected: dict[tuple[str, str], list[Row]]) -> dict[tuple[str, str, str], list[Row]]:
    return {(layer, table, day): sorted(rows) for (table, day), rows in expected.items() for layer in ("raw", "stage")}


@pytest.mark.parametrize("runtime", ["deployed", "embedded"])
def test_every_format_loads_on_each_runtime_with_exactly_the_rows_of_its_files(
    matrix: dict[str, Any], runtime: str
) -> None:
    _, ran, read_back = matrix[runtime]
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-4000:]
    assert f"quarantined {TEAM}/" not in ran.stdout, ran.stdout[-4000:]
    assert table_contents(read_back) == expected_contents(matrix["expected"])


def test_the_deployed_run_wrote_the_ddl_of_each_format_for_athena(matrix: dict[str, Any]) -> None:
    """The raw tables' DDL is what Athena runs: OpenCSVSerde with a header line, the OpenX JSON SerDe,
    Parquet; the stage tables' each in its settings' format."""
    project, ran, _ = matrix["deployed"]
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-4000:]
    sources = (project / ".lakeline" / "deployed" / "sources.sql").read_text().splitlines()
    marker = {"csv": "OpenCSVSerde", "json": "'org.openx.data.jsonserde.JsonSerDe'", "parquet": "STORED AS PARQUET"}
    for table, kind, _, _ in cases():
        (raw,) = [line for line in sources if f"`{RAW_DB}`.`{table}` (" in line]
        assert marker[kind] in raw, raw
        (stage,) = [line for line in sources if f"`{STAGE_DB}`.`{table}` (" in line]
        stage_format = stage_formats()[table][0]
        assert ("JsonSerDe" if stage_format == "JSON" else f"STORED AS {stage_format}") in stage, stage


def test_the_parquet_writer_s_pages_are_what_was_asked() -> None:
    """The hand-written Parquet's GZIP pages hold the plain pages' bytes (a reader's check that the
    compressed case is compressed)."""
    rows = file_rows(0, 1)
    plain, packed = parquet_bytes(rows, compressed=False), parquet_bytes(rows, compressed=True)
    assert plain != packed and b"\x1f\x8b" in packed and b"\x1f\x8b" not in plain
    start = packed.index(b"\x1f\x8b")
    assert zlib.decompressobj(wbits=31).decompress(packed[start:]) == struct.pack("<q", rows[0][0]) + struct.pack(
        "<q", rows[1][0]
    ) + struct.pack("<q", rows[2][0])
