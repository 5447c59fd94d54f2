"""Files read by name (``stage_a.by_name``): the copy in the table's column order (CSV) or key spelling
(JSON) holds exactly the file's values, in the table's dialect and encoding, and reads back as the table
reads."""

from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

import pytest

from lakeline.engines.base import Column
from stage_a.by_name import copy_key, in_table_order
from stage_a.contract import ColumnsByName, RawContract, check_raw_file
from stage_a.raw_files import LocalRawFile
from tests.unit.test_raw_contract import TABLE


def copy_of(tmp_path: Path, name: str, body: bytes, contract: RawContract) -> bytes:
    path = tmp_path / name
    path.write_bytes(body)
    with pytest.raises(ColumnsByName):
        check_raw_file(contract, LocalRawFile(path))
    with in_table_order(contract, LocalRawFile(path)) as copy:
        written = copy.read()
    # The copy keeps the contract as it is: loaded by position, each value lands in its own column.
    (tmp_path / f"copy-{name}").write_bytes(written)
    assert check_raw_file(contract, LocalRawFile(tmp_path / f"copy-{name}")) == ()
    return written


@pytest.mark.parametrize(
    ("key", "copy"),
    [
        ("t/d/sales/day=1/a.csv", "t/d/sales/day=1/a.lakeline-by-name.csv"),
        ("t/d/sales/day=1/a.b.CSV", "t/d/sales/day=1/a.b.lakeline-by-name.csv"),  # what the router may write
        ("t/d/sales/day=1/a.Csv.GZ", "t/d/sales/day=1/a.lakeline-by-name.csv.gz"),
        ("t/d/sales/day=1/a.csv.gz", "t/d/sales/day=1/a.lakeline-by-name.csv.gz"),
        ("t/d/sales/day=1/a.lakeline-by-name.csv", None),  # a copy is never copied again
        ("t/d/sales/day=1/a.json", "t/d/sales/day=1/a.lakeline-by-name.json"),  # keys spelled as the table (#36)
        ("t/d/sales/day=1/a.JSONL.gz", "t/d/sales/day=1/a.lakeline-by-name.jsonl.gz"),
        ("t/d/sales/day=1/a.lakeline-by-name.json", None),
        ("t/d/sales/day=1/a.parquet", None),
    ],
)
def test_the_copy_sits_next_to_its_file(key: str, copy: str | None) -> None:
    assert copy_key(key) == copy


def test_quoted_fields_doubled_quotes_newlines_and_blank_lines_are_copied_value_for_value(tmp_path: Path) -> None:
    body = b'name,amount,sale_id\r\n"Smith, ""Al""\nJr.",2.00,1\r\n\r\n,,2\r\n'
    contract = RawContract.of(replace(TABLE, multiline_fields=True))
    assert copy_of(tmp_path, "s.csv", body, contract) == (
        b'sale_id,name,amount\r\n1,"Smith, ""Al""\nJr.",2.00\r\n2,,\r\n'
    )


def test_a_table_that_never_quotes_gets_a_copy_that_never_quotes(tmp_path: Path) -> None:
    contract = RawContract.of(replace(TABLE, delimiter="|"))
    lazy_simple = replace(contract, quote="")
    body = b'name|sale_id|amount\n"Al" x|1|2\n'
    assert copy_of(tmp_path, "s.csv", body, lazy_simple) == b'sale_id|name|amount\r\n1|"Al" x|2\r\n'


def test_the_copy_keeps_the_declared_encoding_and_the_compression(tmp_path: Path) -> None:
    contract = RawContract.of(TABLE, encoding="latin-1")
    body = gzip.compress("name,sale_id,amount\ncafé,1,2\n".encode("latin-1"))
    written = copy_of(tmp_path, "s.csv.gz", body, contract)
    assert gzip.decompress(written) == "sale_id,name,amount\r\n1,café,2\r\n".encode("latin-1")


def test_columns_a_file_adds_follow_the_tables_in_the_files_order(tmp_path: Path) -> None:
    contract = RawContract.of(TABLE, evolution="add-columns")
    body = b"store,amount,sale_id,till,name\n7,1,2,9,ann\n"
    path = tmp_path / "s.csv"
    path.write_bytes(body)
    with pytest.raises(ColumnsByName) as moved:
        check_raw_file(contract, LocalRawFile(path))
    assert moved.value.added == (Column("store", "string"), Column("till", "string"))
    with in_table_order(contract, LocalRawFile(path)) as copy:
        assert copy.read() == b"sale_id,name,amount,store,till\r\n2,ann,1,7,9\r\n"


def test_a_value_holding_a_bare_carriage_return_stays_one_quoted_value(tmp_path: Path) -> None:
    contract = RawContract.of(replace(TABLE, multiline_fields=True))
    written = copy_of(tmp_path, "s.csv", b'name,sale_id,amount\n"a\rb",1,2\n', contract)
    assert written == b'sale_id,name,amount\r\n1,"a\rb",2\r\n'


def test_a_json_copy_spells_keys_as_the_table_and_keeps_every_value_as_written(tmp_path: Path) -> None:
    """Keys of another case (columns, struct fields, in arrays of structs) spelled as the table (#36); map
    keys are data and stay; numbers as written; blank lines kept."""
    from lakeline.engines.base import TableSchema

    table = TableSchema(
        "raw",
        "events",
        (
            Column("store", "string"),
            Column("amount", "decimal(10,2)"),
            Column("ship", "struct<City:string,lines:array<struct<sku:string>>>"),
            Column("attrs", "map<string,bigint>"),
        ),
        format="json",
    )
    contract = RawContract.of(table)
    line = (
        '{"STORE": "caf\u00e9 \\"x\\"", "Amount": 1.50, "Ship": {"city": "Oslo", "LINES": [{"SKU": "a"}, null]}, '
        '"Attrs": {"Key": 12345678901234567}}\n'
    )
    written = copy_of(tmp_path, "e.json", (line + "\n" + '{"store": null}\n').encode(), contract)
    assert written.decode("ascii").splitlines() == [
        '{"store":"caf\\u00e9 \\"x\\"","amount":1.50,"ship":{"City":"Oslo","lines":[{"sku":"a"},null]},'
        '"attrs":{"Key":12345678901234567}}',
        "",
        '{"store":null}',
    ]
    packed = copy_of(tmp_path, "e.json.gz", gzip.compress(line.encode()), contract)
    assert gzip.decompress(packed) == written.splitlines(keepends=True)[0]
