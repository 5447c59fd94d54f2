"""``lakeline run`` over a generated project of the issue's shape, every figure checked against a plain
Python computation from the generated rows: after the first run, after a rerun with nothing new, and
after a held-back late file lands in a day already processed.

The project: flights as CSV per day (several files on some days, NULL delays for cancelled flights),
weather as Parquet per day (one day never gets its file; NULL readings, airports without a reading),
airlines as an unpartitioned JSON-lines table (a NULL alliance; one carrier missing) joined in a step;
``daily_ops`` waits for flights *and* weather (``triggerMode: all``), ``weekly_ops`` is chained from it
into the week ending on Saturday, and ``ops_3d`` is the trailing three-day window over it
(``TargetRange``). ``carrier_log`` and ``ops_log`` are ``append`` targets (one ``any``, one ``all``):
each version of a day's flights replaces the rows the last one appended. The late file must rebuild
its day, its week, the three windows containing it and its day of each log, and nothing else.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import random
import struct
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.in_process import invoke

# The local deployment's first run of the project takes minutes on a busy 2-core machine.
pytestmark = pytest.mark.timeout(1800)

LAKELINE = [sys.executable, "-m", "lakeline"]
SEED = 20240502
FIRST_DAY = date(2024, 5, 2)  # a Thursday: each of the two weeks (ending on Saturday) holds three days
DAYS = [(FIRST_DAY + timedelta(days=offset)).isoformat() for offset in range(6)]
WINDOW = 3
AIRLINES: dict[str, tuple[str, str | None]] = {
    "IB": ("Iberia", "oneworld"),
    "BA": ("British Airways", "oneworld"),
    "LH": ("Lufthansa", "Star Alliance"),
    "AF": ("Air France", "SkyTeam"),
    "KL": ("KLM", "SkyTeam"),
    "FR": ("Ryanair", None),
    "U2": ("easyJet", None),
}
CARRIERS = [*AIRLINES, "ZZ"]  # ZZ: a charter the airline table lacks (its flights join no alliance)
AIRPORTS = ["MAD", "BCN", "LHR", "CDG", "FRA"]

DEPENDENCY = {"FieldColumn": "day", "Usage": "overwrite", "DateExpression": "%Y-%m-%d"}
# The sources of a day's triggerMode all targets (daily_ops, airport_day): that day's flights and weather.
SAME_DAY_FLIGHTS_AND_WEATHER = [
    {"TableName": f"air_ops_dev.{table}", **DEPENDENCY, "relativedelta_attributes": {"days": 0}}
    for table in ("flights", "weather")
]
ITEMS: dict[str, dict[str, Any]] = {
    "daily_ops": {
        "dataset": "air_reports_dev.daily_ops",
        "triggerMode": "all",
        "dependencies": SAME_DAY_FLIGHTS_AND_WEATHER,
        "partitionColumn": "day",
        "partitionPythonMask": "%Y-%m-%d",
        "steps": [{"db": "air_reports_dev", "sql_file": "daily_ops.sql", "info": "flights per airport and alliance"}],
        "date_substitutions": [{"token": "$day", "format": "%Y-%m-%d", "relativedelta_attributes": {"days": 0}}],
    },
    "weekly_ops": {
        "dataset": "air_reports_dev.weekly_ops",
        "dependencies": [
            {
                "TableName": "air_reports_dev.daily_ops",
                **DEPENDENCY,
                "relativedelta_attributes": {"weekday": "SA(+1)"},
            }
        ],
        "partitionColumn": "week_ending",
        "partitionPythonMask": "%Y-%m-%d",
        "steps": [
            {
                "db": "air_reports_dev",
                "info": "the week ending on Saturday, per airport",
                "sql": "INSERT INTO air_reports_dev.weekly_ops SELECT origin, sum(flights), sum(departed), "
                "round(sum(delay_minutes), 2), round(sum(revenue), 2), max(precip_mm), count(DISTINCT day), "
                "'$partition_value' FROM air_reports_dev.daily_ops WHERE day BETWEEN '$start_date' AND '$end_date' "
                "GROUP BY origin",
            }
        ],
        "date_substitutions": [
            {"token": "$start_date", "format": "%Y-%m-%d", "relativedelta_attributes": {"days": -6}},
            {"token": "$end_date", "format": "%Y-%m-%d", "relativedelta_attributes": {"days": 0}},
        ],
    },
    "ops_3d": {
        "dataset": "air_reports_dev.ops_3d",
        # A day's figures are in the windows ending on it and on the two days after it.
        "dependencies": [
            {
                "TableName": "air_reports_dev.daily_ops",
                **DEPENDENCY,
                "relativedelta_attributes": {"days": 0},
                "TargetRange": {"count": WINDOW, "step": {"days": 1}},
            }
        ],
        "partitionColumn": "day",
        "partitionPythonMask": "%Y-%m-%d",
        "steps": [
            {
                "db": "air_reports_dev",
                "info": "the three days ending on the partition's",
                "sql": "INSERT INTO air_reports_dev.ops_3d SELECT sum(flights), sum(departed), "
                "round(sum(delay_minutes), 2), round(sum(revenue), 2), count(DISTINCT day), '$day' "
                "FROM air_reports_dev.daily_ops WHERE day BETWEEN '$first_day' AND '$day'",
            }
        ],
        "date_substitutions": [
            {"token": "$day", "format": "%Y-%m-%d", "relativedelta_attributes": {"days": 0}},
            {"token": "$first_day", "format": "%Y-%m-%d", "relativedelta_attributes": {"days": 1 - WINDOW}},
        ],
    },
    # Append targets: a day's rows are added to the partition, once per triggering partition; a new
    # version of that partition (a second file, a late one) replaces the rows it added before.
    "carrier_log": {
        "dataset": "air_reports_dev.carrier_log",
        "dependencies": [
            {
                "TableName": "air_ops_dev.flights",
                **DEPENDENCY,
                "Usage": "append",
                "relativedelta_attributes": {"days": 0},
            }
        ],
        "partitionColumn": "day",
        "partitionPythonMask": "%Y-%m-%d",
        "steps": [
            {
                "db": "air_reports_dev",
                "info": "flights per carrier",
                "sql": "INSERT INTO air_reports_dev.carrier_log SELECT carrier, count(*), '$day' "
                "FROM air_ops_dev.flights WHERE day = '$day' GROUP BY carrier",
            }
        ],
        "date_substitutions": [{"token": "$day", "format": "%Y-%m-%d", "relativedelta_attributes": {"days": 0}}],
    },
    # Two steps insert into the same target: the first one's rows and the second one's end up together.
    "airport_day": {
        "dataset": "air_reports_dev.airport_day",
        "triggerMode": "all",
        "dependencies": SAME_DAY_FLIGHTS_AND_WEATHER,
        "partitionColumn": "day",
        "partitionPythonMask": "%Y-%m-%d",
        "steps": [
            {
                "db": "air_reports_dev",
                "info": "flights per airport",
                "sql": "INSERT INTO air_reports_dev.airport_day SELECT origin, 'flights', count(*), '$day' "
                "FROM air_ops_dev.flights WHERE day = '$day' GROUP BY origin",
            },
            {
                "db": "air_reports_dev",
                "info": "readings per airport",
                "sql": "INSERT INTO air_reports_dev.airport_day SELECT airport, 'readings', count(*), '$day' "
                "FROM air_ops_dev.weather WHERE day = '$day' GROUP BY airport",
            },
        ],
        "date_substitutions": [{"token": "$day", "format": "%Y-%m-%d", "relativedelta_attributes": {"days": 0}}],
    },
    "ops_log": {
        "dataset": "air_reports_dev.ops_log",
        "triggerMode": "all",
        "dependencies": [
            {
                "TableName": f"air_ops_dev.{table}",
                **DEPENDENCY,
                "Usage": "append",
                "relativedelta_attributes": {"days": 0},
            }
            for table in ("flights", "weather")
        ],
        "partitionColumn": "day",
        "partitionPythonMask": "%Y-%m-%d",
        "steps": [
            {
                "db": "air_reports_dev",
                "info": "the day's flights and readings",
                "sql": "INSERT INTO air_reports_dev.ops_log SELECT (SELECT count(*) FROM air_ops_dev.flights "
                "WHERE day = '$day'), (SELECT count(*) FROM air_ops_dev.weather WHERE day = '$day'), '$day'",
            }
        ],
        "date_substitutions": [{"token": "$day", "format": "%Y-%m-%d", "relativedelta_attributes": {"days": 0}}],
    },
}
DAILY_SQL = """
INSERT INTO air_reports_dev.daily_ops
SELECT f.origin, a.alliance, count(*) AS flights, count(f.dep_delay) AS departed,
       round(sum(f.dep_delay), 2) AS delay_minutes, round(sum(f.fare), 2) AS revenue,
       max(w.precip_mm) AS precip_mm, max(w.temp_c) AS temp_c, '$day' AS day
FROM air_ops_dev.flights f
LEFT JOIN air_ops_dev.airlines a ON a.code = f.carrier
LEFT JOIN air_ops_dev.weather w ON w.airport = f.origin AND w.day = f.day
WHERE f.day = '$day'
GROUP BY f.origin, a.alliance
"""
TABLES = """
CREATE DATABASE IF NOT EXISTS air_reports_dev;
CREATE EXTERNAL TABLE IF NOT EXISTS air_reports_dev.daily_ops (
    origin STRING, alliance STRING, flights BIGINT, departed BIGINT, delay_minutes DOUBLE, revenue DOUBLE,
    precip_mm DOUBLE, temp_c DOUBLE
) PARTITIONED BY (day STRING) STORED AS PARQUET LOCATION '$analytics_root/daily_ops/';
CREATE EXTERNAL TABLE IF NOT EXISTS air_reports_dev.weekly_ops (
    origin STRING, flights BIGINT, departed BIGINT, delay_minutes DOUBLE, revenue DOUBLE, wettest_mm DOUBLE,
    days BIGINT
) PARTITIONED BY (week_ending STRING) STORED AS PARQUET LOCATION '$analytics_root/weekly_ops/';
CREATE EXTERNAL TABLE IF NOT EXISTS air_reports_dev.ops_3d (
    flights BIGINT, departed BIGINT, delay_minutes DOUBLE, revenue DOUBLE, days BIGINT
) PARTITIONED BY (day STRING) STORED AS PARQUET LOCATION '$analytics_root/ops_3d/';
CREATE EXTERNAL TABLE IF NOT EXISTS air_reports_dev.carrier_log (carrier STRING, flights BIGINT)
PARTITIONED BY (day STRING) STORED AS PARQUET LOCATION '$analytics_root/carrier_log/';
CREATE EXTERNAL TABLE IF NOT EXISTS air_reports_dev.ops_log (flights BIGINT, readings BIGINT)
PARTITIONED BY (day STRING) STORED AS PARQUET LOCATION '$analytics_root/ops_log/';
CREATE EXTERNAL TABLE IF NOT EXISTS air_reports_dev.airport_day (airport STRING, measure STRING, n BIGINT)
PARTITIONED BY (day STRING) STORED AS PARQUET LOCATION '$analytics_root/airport_day/';
"""
CONFIG = """workspace: ws
raw: incoming
environment: dev
dependencies: [deps]
tables: [tables.sql]
queries: queries
tables_settings:
  air_ops_dev.flights: {bucketed_by: [origin], bucket_count: 2}
  air_ops_dev.weather: {format: ORC, compression: ZLIB}
"""


@dataclass(frozen=True)
class Flight:
    day: str
    flight_id: int
    carrier: str
    origin: str
    dep_delay: float | None  # NULL: cancelled
    fare: float


@dataclass(frozen=True)
class Reading:
    airport: str
    temp_c: float | None
    precip_mm: float | None


@dataclass(frozen=True)
class DataSet:
    flight_files: dict[str, list[list[Flight]]]  # day -> the files that land on it
    weather: dict[str, list[Reading]]  # every day but one
    late_day: str
    late: list[Flight]  # held back: lands after the day was processed


def generate(seed: int) -> DataSet:
    rng = random.Random(seed)
    ids = iter(range(1000, 100_000))

    def flights(day: str) -> list[Flight]:
        return [
            Flight(
                day,
                next(ids),
                rng.choice(CARRIERS),
                rng.choice(AIRPORTS),
                None if rng.random() < 0.08 else round(rng.gauss(9, 22), 1),
                round(rng.uniform(29, 480), 2),
            )
            for _ in range(rng.randint(6, 30))
        ]

    def maybe(value: float) -> float | None:
        return None if rng.random() < 0.1 else value

    files = {day: [flights(day) for _ in range(rng.randint(1, 3))] for day in DAYS}
    no_weather = rng.choice(DAYS[1:-1])
    weather = {
        day: [
            Reading(airport, maybe(round(rng.uniform(4, 31), 1)), maybe(round(rng.expovariate(0.6), 1)))
            for airport in AIRPORTS
            if rng.random() < 0.85
        ]
        for day in DAYS
        if day != no_weather
    }
    late_day = rng.choice([day for day in DAYS[:-1] if day in weather])
    return DataSet(files, weather, late_day, flights(late_day))


# --- writing the raw folder ---------------------------------------------------------------------------


def raw_folder(root: Path, table: str, day: str | None = None) -> Path:
    folder = root / "incoming" / "air" / "ops" / table
    folder = folder / f"day={day}" if day else folder
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_flights(path: Path, flights: list[Flight]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["flight_id", "carrier", "origin", "dep_delay", "fare"])
        for f in flights:  # an empty field is NULL; decimals always written, so the columns are doubles
            delay = "" if f.dep_delay is None else f"{f.dep_delay:.1f}"
            writer.writerow([f.flight_id, f.carrier, f.origin, delay, f"{f.fare:.2f}"])


# A Parquet writer, as pandas and pyarrow are not installed: the footer is Thrift's compact protocol
# (apache/parquet-format's parquet.thrift), the data uncompressed PLAIN pages.
I32, I64, BINARY, LIST, STRUCT = 5, 6, 8, 9, 12  # Thrift compact types
PLAIN, RLE, DOUBLE, BYTE_ARRAY, UTF8, REQUIRED, OPTIONAL = 0, 3, 5, 6, 0, 0, 1  # parquet.thrift's enums


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes([*out, value])


def _int(value: int) -> bytes:
    return _varint((value << 1) ^ (value >> 63))  # zigzag


def _text(value: str) -> bytes:
    return _varint(len(value.encode())) + value.encode()


def _list(kind: int, elements: list[bytes]) -> bytes:
    size = len(elements)
    header = bytes([size << 4 | kind]) if size < 15 else bytes([0xF0 | kind]) + _varint(size)
    return header + b"".join(elements)


def _struct(*fields: tuple[int, int, bytes]) -> bytes:
    """Thrift compact protocol: each field's id as a delta from the previous one, then a stop byte."""
    out, last = bytearray(), 0
    for field_id, kind, payload in fields:
        out += bytes([(field_id - last) << 4 | kind]) + payload
        last = field_id
    return bytes(out) + b"\x00"


def write_weather(path: Path, readings: list[Reading]) -> None:
    """One row group of three columns: ``airport`` a required UTF8 string, ``temp_c`` and
    ``precip_mm`` optional doubles."""
    columns: list[tuple[str, list[Any]]] = [
        ("airport", [r.airport for r in readings]),
        ("temp_c", [r.temp_c for r in readings]),
        ("precip_mm", [r.precip_mm for r in readings]),
    ]
    body = bytearray(b"PAR1")
    schema = [_struct((4, BINARY, _text("schema")), (5, I32, _int(len(columns))))]
    chunks: list[bytes] = []
    for name, values in columns:
        if name == "airport":
            kind = BYTE_ARRAY
            data = b"".join(struct.pack("<I", len(text := value.encode())) + text for value in values)
            described = [(1, I32, _int(kind)), (3, I32, _int(REQUIRED)), (4, BINARY, _text(name)), (6, I32, _int(UTF8))]
        else:
            kind = DOUBLE
            # Definition levels, length-prefixed: an RLE run of length 1 per row (1: a value, 0: NULL).
            levels = b"".join(b"\x02" + bytes([value is not None]) for value in values)
            doubles = b"".join(struct.pack("<d", value) for value in values if value is not None)
            data = struct.pack("<I", len(levels)) + levels + doubles
            described = [(1, I32, _int(kind)), (3, I32, _int(OPTIONAL)), (4, BINARY, _text(name))]
        schema.append(_struct(*described))
        data_page = _struct(
            (1, I32, _int(len(values))), (2, I32, _int(PLAIN)), (3, I32, _int(RLE)), (4, I32, _int(RLE))
        )
        header = _struct(
            (1, I32, _int(0)), (2, I32, _int(len(data))), (3, I32, _int(len(data))), (5, STRUCT, data_page)
        )
        offset, size = len(body), len(header) + len(data)
        body += header + data
        metadata = _struct(
            (1, I32, _int(kind)),
            (2, LIST, _list(I32, [_int(PLAIN), _int(RLE)])),
            (3, LIST, _list(BINARY, [_text(name)])),
            (4, I32, _int(0)),  # uncompressed
            (5, I64, _int(len(values))),
            (6, I64, _int(size)),
            (7, I64, _int(size)),
            (9, I64, _int(offset)),
        )
        chunks.append(_struct((2, I64, _int(offset)), (3, STRUCT, metadata)))
    rows = len(readings)
    group = _struct((1, LIST, _list(STRUCT, chunks)), (2, I64, _int(len(body) - 4)), (3, I64, _int(rows)))
    footer = _struct(
        (1, I32, _int(1)), (2, LIST, _list(STRUCT, schema)), (3, I64, _int(rows)), (4, LIST, _list(STRUCT, [group]))
    )
    path.write_bytes(bytes(body) + footer + struct.pack("<I", len(footer)) + b"PAR1")


def project(root: Path, data: DataSet) -> Path:
    """The project folder. No item names ``airlines`` as a source (it has no days), so it must be loaded
    before a day's step joins it: ``lakeline run`` sends the raw files in path order, airlines first."""
    for name, item in ITEMS.items():
        (root / "deps").mkdir(exist_ok=True)
        (root / "deps" / f"{name}.json").write_text(json.dumps(item, indent=1))
    (root / "queries" / "air").mkdir(parents=True)
    (root / "queries" / "air" / "daily_ops.sql").write_text(DAILY_SQL)
    (root / "tables.sql").write_text(TABLES)
    airlines = raw_folder(root, "airlines") / "airlines.jsonl"
    airlines.write_text(
        "".join(
            json.dumps({"code": code, "name": name, "alliance": alliance}) + "\n"
            for code, (name, alliance) in AIRLINES.items()
        )
    )
    for day, files in data.flight_files.items():
        for number, flights in enumerate(files, start=1):
            write_flights(raw_folder(root, "flights", day) / f"flights-{number}.csv", flights)
    for day, readings in data.weather.items():
        write_weather(raw_folder(root, "weather", day) / f"weather-{day}.parquet", readings)
    (root / "lakeline.yml").write_text(CONFIG)
    return root / "lakeline.yml"


# --- the figures, computed here ---------------------------------------------------------------------


def shift(day: str, days: int) -> str:
    return (date.fromisoformat(day) + timedelta(days=days)).isoformat()


def week_ending(day: str) -> str:
    """The Saturday on or after ``day``."""
    return shift(day, (5 - date.fromisoformat(day).weekday()) % 7)


def money(values: Iterable[float | None]) -> float | None:
    """SQL's round(sum(x), 2): NULLs skipped, NULL if nothing is left. The inputs have at most two
    decimals, so the sum rounds to the same figure whatever order Spark adds them in."""
    present = [value for value in values if value is not None]
    return round(sum(present), 2) if present else None


def biggest(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return max(present) if present else None


def expected_tables(data: DataSet, flights: list[Flight]) -> dict[str, list[list[Any]]]:
    """Every row of every target, as ``SELECT *`` gives them (partition column last)."""
    weather = {(day, r.airport): r for day, readings in data.weather.items() for r in readings}
    built = [f for f in flights if f.day in data.weather]  # triggerMode all: a day without weather waits
    groups: dict[tuple[str, str, str | None], list[Flight]] = defaultdict(list)
    for f in built:
        groups[(f.day, f.origin, AIRLINES.get(f.carrier, ("", None))[1])].append(f)  # left joins
    daily = []
    for (day, origin, alliance), group in groups.items():
        reading = weather.get((day, origin))
        daily.append(
            [
                origin,
                alliance,
                len(group),
                sum(f.dep_delay is not None for f in group),
                money(f.dep_delay for f in group),
                money(f.fare for f in group),
                reading.precip_mm if reading else None,
                reading.temp_c if reading else None,
                day,
            ]
        )
    # From the flights themselves, not from the daily rows: a week's SQL sums the days' rounded sums,
    # the same figure as long as every input has at most two decimals.
    weeks: dict[tuple[str, str], list[Flight]] = defaultdict(list)
    for f in built:
        weeks[(week_ending(f.day), f.origin)].append(f)
    weekly = [
        [
            origin,
            len(group),
            sum(f.dep_delay is not None for f in group),
            money(f.dep_delay for f in group),
            money(f.fare for f in group),
            biggest(
                r.precip_mm
                for (day, airport), r in weather.items()
                if airport == origin and day in {f.day for f in group}
            ),
            len({f.day for f in group}),
            week,
        ]
        for (week, origin), group in weeks.items()
    ]
    windows = []
    for end in sorted({shift(f.day, n) for f in built for n in range(WINDOW)}):
        group = [f for f in built if shift(end, 1 - WINDOW) <= f.day <= end]
        windows.append(
            [
                len(group),
                sum(f.dep_delay is not None for f in group),
                money(f.dep_delay for f in group),
                money(f.fare for f in group),
                len({f.day for f in group}),
                end,
            ]
        )
    carriers: dict[tuple[str, str], int] = defaultdict(int)
    for f in flights:
        carriers[(f.day, f.carrier)] += 1
    day_flights = {day: sum(f.day == day for f in flights) for day in DAYS}
    airports: dict[tuple[str, str, str], int] = defaultdict(int)
    for f in built:
        airports[(f.origin, "flights", f.day)] += 1
    for day, readings in data.weather.items():
        for r in readings:
            airports[(r.airport, "readings", day)] += 1
    return {
        # One row per carrier and day, and one per day with weather, however many versions a day had.
        "air_reports_dev.carrier_log": sorted(([c, n, day] for (day, c), n in carriers.items()), key=repr),
        "air_reports_dev.ops_log": sorted(
            ([day_flights[day], len(readings), day] for day, readings in data.weather.items()), key=repr
        ),
        "air_reports_dev.daily_ops": sorted(daily, key=repr),
        "air_reports_dev.weekly_ops": sorted(weekly, key=repr),
        "air_reports_dev.ops_3d": sorted(windows, key=repr),
        # Days without weather wait (triggerMode all); every other day has both steps' rows.
        "air_reports_dev.airport_day": sorted(
            ([airport, measure, n, day] for (airport, measure, day), n in airports.items() if day in data.weather),
            key=repr,
        ),
    }


# --- running lakeline ----------------------------------------------------------------------------------


def lakeline(config: Path, *args: str, timeout: float = 1500) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = subprocess.run(
        [*LAKELINE, *args, "--config", str(config)],
        cwd=config.parent,
        env={**os.environ, "COLUMNS": "400"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return result, time.monotonic() - started


# Each runtime's command line and the folder of the workspace its results are in.
RUNTIMES = {"embedded": (("--embedded",), "ws"), "deployed": ((), "ws/deployed")}


def results(root: Path, runtime: str) -> Path:
    return root / RUNTIMES[runtime][1]


def summary(root: Path, runtime: str) -> dict[str, Any]:
    return dict(json.loads((results(root, runtime) / "summary.json").read_text()))


def assert_figures(root: Path, runtime: str, data: DataSet, flights: list[Flight]) -> None:
    contents = summary(root, runtime)["contents"]
    for table, rows in expected_tables(data, flights).items():
        assert sorted(contents[table], key=repr) == rows, table


def assert_stage_rows(root: Path, runtime: str, data: DataSet, flights: list[Flight]) -> None:
    """Each stage partition holds exactly the rows of its raw files (the late file's too, once sent)."""
    rows = {(t["table"], t["partition"]): t["rows"] for t in summary(root, runtime)["tables"]}
    counts: dict[str, int] = defaultdict(int)
    for f in flights:
        counts[f.day] += 1
    assert {day: rows[("air_ops_dev.flights", f"day={day}")] for day in DAYS} == counts
    assert {day: rows[("air_ops_dev.weather", f"day={day}")] for day in data.weather} == {
        day: len(readings) for day, readings in data.weather.items()
    }


def assert_lineage_of_every_raw_file(root: Path, archive: Path) -> None:
    """Every raw file has its RAW_DATA_INPUT in the lineage archive, whichever run took it (at once, as the
    follow-up of a run in flight, or late), and it leads to a version of its stage partition; and every
    archived tree is whole."""
    lines = [json.loads(line) for path in sorted(archive.rglob("*.jsonl")) for line in path.read_text().splitlines()]
    assert lines and [line["root_id"] for line in lines if line["status"] != "complete"] == []
    reached: dict[str, set[str]] = defaultdict(set)
    for line in lines:
        nodes = line["lineage"]
        for node in nodes:
            if node["action_taken"] == "RAW_DATA_INPUT":
                key = "air/ops/" + node["storage_location"].split("/air/ops/", 1)[1]
                reached[key] |= {
                    child["storage_location"]
                    for child in nodes
                    if child["parent_id"] == node["node_id"] and child["action_taken"] == "STAGE_A_COMPLETE"
                }
    files = sorted(path.relative_to(root / "incoming").as_posix() for path in (root / "incoming").rglob("*.*"))
    assert sorted(reached) == files
    for key, versions in reached.items():
        folder = key.rsplit("/", 1)[0]
        assert versions and all(f"/{folder}/lakeline_run=" in version for version in versions), key


def status(config: Path) -> dict[str, Any]:
    """``lakeline status`` (no Spark; in this process, as ``test_example_project.py`` runs it as a process): every
    partition's published version, the ``all`` targets waiting."""
    result = invoke(["status", "--format", "json", "--config", str(config)], config.parent)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return dict(json.loads(result.stdout))


def versions(report: dict[str, Any]) -> dict[tuple[str, str], int]:
    return {(p["table"], p["partition"]): p["version"] for p in report["partitions"]}


def partitions(data: DataSet, flights: list[Flight]) -> set[tuple[str, str]]:
    """Every partition the pipeline should hold: stage tables and targets."""
    columns = {"air_reports_dev.weekly_ops": "week_ending"}
    return {
        ("air_ops_dev.airlines", ""),
        *(("air_ops_dev.flights", f"day={day}") for day in DAYS),
        *(("air_ops_dev.weather", f"day={day}") for day in data.weather),
        *(
            (table, f"{columns.get(table, 'day')}={row[-1]}")
            for table, rows in expected_tables(data, flights).items()
            for row in rows
        ),
    }


def workspace_files(root: Path) -> dict[str, str]:
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted((root / "ws").rglob("*"))
        if path.is_file()
    }


def assert_ran_cleanly(ran: dict[str, Any], runtime: str, raw_files: int) -> None:
    """Nothing failed, parked or quarantined, and ``raw_files`` stage A runs on the embedded runtime, one per
    file (the local deployment coalesces files that arrive while their partition's run is in flight, as in
    AWS, so it has at most as many)."""
    if runtime == "embedded":
        assert (ran["stage_a_runs"], ran["failures"], ran["quarantined"]) == (raw_files, [], [])
    else:
        assert (ran["failed_executions"], ran["parked"], ran["quarantined"], ran["refused_tables"]) == ([], {}, [], [])
        assert 0 < ran["stage_a_runs"] <= raw_files


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_generated_project_is_right_after_a_run_a_rerun_and_a_late_file(tmp_path: Path, runtime: str) -> None:
    data = generate(SEED)
    # The shape the test is about, whatever the seed gives.
    assert any(len(files) > 1 for files in data.flight_files.values())
    assert len(data.weather) == len(DAYS) - 1 and data.late_day in data.weather
    config = project(tmp_path, data)
    flights = [f for files in data.flight_files.values() for file in files for f in file]
    raw_files = 1 + sum(len(files) for files in data.flight_files.values()) + len(data.weather)
    options = RUNTIMES[runtime][0]

    first, first_seconds = lakeline(config, "run", *options)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    ran = summary(tmp_path, runtime)
    assert_ran_cleanly(ran, runtime, raw_files)
    assert ran.get("duplicates", []) == []
    airlines = {"table": "air_ops_dev.airlines", "partition": "", "rows": len(AIRLINES), "files": 1}
    assert airlines in ran["tables"]
    assert_stage_rows(tmp_path, runtime, data, flights)
    assert_figures(tmp_path, runtime, data, flights)
    # The days without weather wait for it; it is not an error.
    (no_weather,) = set(DAYS) - set(data.weather)
    report = status(config)
    assert sorted((w["target_partition"], w["missing"]) for w in report["waiting_targets"]) == [
        (f"air_reports_dev.{table}/day={no_weather}", ["air_ops_dev.weather"])
        for table in ("airport_day", "daily_ops", "ops_log")
    ]
    before = versions(report)
    assert before.keys() == partitions(data, flights)
    snapshot = workspace_files(tmp_path)

    # Nothing new: said so, exit 0, and not one byte of the workspace changes.
    again, again_seconds = lakeline(config, "run", *options)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"nothing new since the last run: {raw_files} raw files, all" in again.stdout, again.stdout
    assert "Spark" not in again.stdout + again.stderr
    assert workspace_files(tmp_path) == snapshot

    # The held-back file lands in a day already built: its day, its week and its three windows are
    # rebuilt with it, and no other partition is written.
    write_flights(raw_folder(tmp_path, "flights", data.late_day) / "flights-late.csv", data.late)
    late, late_seconds = lakeline(config, "run", *options)
    print(
        f"{runtime}: first run {first_seconds:.1f}s, no-op rerun {again_seconds:.1f}s, "
        f"late-file rerun {late_seconds:.1f}s"
    )
    assert late.returncode == 0, late.stdout[-3000:] + late.stderr[-3000:]
    flights += data.late
    ran = summary(tmp_path, runtime)
    assert_ran_cleanly(ran, runtime, 1)
    assert_stage_rows(tmp_path, runtime, data, flights)
    assert airlines in ran["tables"]  # the summary describes the workspace, not only this run
    assert_figures(tmp_path, runtime, data, flights)
    rebuilt = {
        ("air_ops_dev.flights", f"day={data.late_day}"),
        ("air_reports_dev.daily_ops", f"day={data.late_day}"),
        ("air_reports_dev.weekly_ops", f"week_ending={week_ending(data.late_day)}"),
        *(("air_reports_dev.ops_3d", f"day={shift(data.late_day, n)}") for n in range(WINDOW)),
        ("air_reports_dev.carrier_log", f"day={data.late_day}"),
        ("air_reports_dev.ops_log", f"day={data.late_day}"),
        ("air_reports_dev.airport_day", f"day={data.late_day}"),
    }
    after = versions(status(config))
    assert after.keys() == before.keys() == partitions(data, flights)
    assert {partition for partition, version in after.items() if version != before[partition]} == rebuilt
    assert (ran["stage_a_runs"], ran["stage_b_runs"]) == (1, 5 + WINDOW)
    # The late file's and the earlier ones': a later run records under the earlier runs' trees too.
    assert_lineage_of_every_raw_file(tmp_path, results(tmp_path, runtime) / "lineage-archive")
