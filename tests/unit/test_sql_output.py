"""``lakeline sql --format table|csv|json``: every value, whole, in each format."""

from __future__ import annotations

import csv
import io
import json

import pytest
from rich.console import Console

from lakeline.cli import ResultFormat, print_result
from lakeline.engines.base import QueryResult

LONG = "x" * 150
RESULT = QueryResult(
    query_id="q", columns=["store", "note", "amount"], rows=[("north", LONG, 12.5), ("south, east", None, 7)]
)


def test_csv_has_a_header_and_quotes_what_needs_it(capsys: pytest.CaptureFixture[str]) -> None:
    print_result(RESULT, ResultFormat.csv, Console(file=io.StringIO()))
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows == [["store", "note", "amount"], ["north", LONG, "12.5"], ["south, east", "", "7"]]


def test_json_is_an_array_of_objects(capsys: pytest.CaptureFixture[str]) -> None:
    print_result(RESULT, ResultFormat.json, Console(file=io.StringIO()))
    assert json.loads(capsys.readouterr().out) == [
        {"store": "north", "note": LONG, "amount": 12.5},
        {"store": "south, east", "note": None, "amount": 7},
    ]


def test_a_table_in_a_pipe_is_as_wide_as_its_values() -> None:
    output = io.StringIO()
    piped = Console(file=output, width=80)  # not a terminal: what `lakeline sql ... | less` gets
    print_result(RESULT, ResultFormat.table, piped)
    printed = output.getvalue()
    assert LONG in printed, "a value was cut to fit 80 columns"
    assert "NULL" in printed
