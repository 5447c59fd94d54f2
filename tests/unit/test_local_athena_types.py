"""What the local Athena types and reads without Spark (#42): the columns Athena types ``timestamp with time
zone``, and the spelling of a JSON table's keys taken from its files for Spark's case-sensitive reader."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from lakeline.runtimes.deployed.local_aws.athena_answers import zoned_columns
from lakeline.runtimes.deployed.local_aws.athena_catalog import json_spellings, respelled


@pytest.mark.parametrize(
    ("query", "zoned"),
    [
        ("SELECT from_unixtime(s.recordedAt) AS recordedAt, s.recordedAt FROM t", [True, False]),
        ("SELECT current_timestamp, now(), localtimestamp", [True, True, False]),
        ("SELECT from_iso8601_timestamp('2024-03-01T10:00:00Z'), from_unixtime(1, 'Europe/Paris')", [True, True]),
        ("SELECT TIMESTAMP '2024-03-01 10:00:00 UTC', TIMESTAMP '2024-03-01 10:00:00'", [True, False]),
        ("SELECT CAST(from_unixtime(1) AS timestamp), date_parse('2024', '%Y')", [False, False]),
        ("SELECT * FROM t", [False, False]),
        ("SELECT from_unixtime(1) AS a UNION ALL SELECT from_unixtime(2)", [True]),
    ],
)
def test_the_columns_athena_types_timestamp_with_time_zone(query: str, zoned: list[bool]) -> None:
    assert zoned_columns(query, len(zoned)) == zoned


def test_a_json_table_s_keys_are_spelled_as_its_files_spell_them(tmp_path: Path) -> None:
    (tmp_path / "dt=2026-11-29").mkdir()
    (tmp_path / "dt=2026-11-29" / "a.jsonl").write_text(
        '{"record_id": "r", "lineage": [{"action_taken": "x", "recordedAt": 1}]}\n{"Later": 2}\n'
    )
    with gzip.open(tmp_path / "b.json.gz", "wt") as handle:
        handle.write('{"runId": "x", "nested": {"innerKey": [1]}}\n')
    (tmp_path / "c.json").write_text("not json\n")
    (tmp_path / "_SUCCESS").write_text('{"Hidden": 1}\n')
    spellings = json_spellings(tmp_path)
    assert spellings == {"recordedat": "recordedAt", "runid": "runId", "innerkey": "innerKey"}
    kind = "array<struct<action_taken:string,recordedat:bigint,other:struct<innerkey:int>>>"
    assert (
        respelled(kind, spellings) == "array<struct<action_taken:string,recordedAt:bigint,other:struct<innerKey:int>>>"
    )
    assert respelled("bigint", spellings) == "bigint"
    assert json_spellings(tmp_path / "none") == {}
