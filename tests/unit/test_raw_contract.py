"""The contract check at the door (``stage_a.contract``) on the files a real lake receives."""

from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

import pytest

from lakeline.engines.base import Column, TableSchema
from stage_a.by_name import in_table_order
from stage_a.contract import ColumnsByName, ContractViolation, RawContract, check_raw_file
from stage_a.raw_files import LocalRawFile

TABLE = TableSchema(
    database="shop_pos_raw",
    table="sales",
    columns=(Column("sale_id", "bigint"), Column("name", "string"), Column("amount", "decimal(10,2)")),
    partition_columns=(Column("day", "string"),),
    format="csv",
)


def check(tmp_path: Path, name: str, body: bytes, **contract: str) -> tuple[Column, ...]:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    return check_raw_file(RawContract.of(TABLE, **contract), LocalRawFile(path))  # type: ignore[arg-type]


def refused(tmp_path: Path, name: str, body: bytes, **contract: str) -> str:
    with pytest.raises(ContractViolation) as caught:
        check(tmp_path, name, body, **contract)
    return str(caught.value)


def test_a_file_that_keeps_the_contract_passes(tmp_path: Path) -> None:
    assert check(tmp_path, "s.csv", b"sale_id,name,amount\n1,ann,2.50\n2,,\n\n") == ()


def test_rfc_4180_quoted_delimiters_newlines_and_doubled_quotes_are_one_field(tmp_path: Path) -> None:
    body = b'sale_id,name,amount\n1,"Smith, ""Al""\nJr.",2.00\r\n2,"x",1\r\n'
    path = tmp_path / "s.csv"
    path.write_bytes(body)
    spark_table = replace(TABLE, multiline_fields=True)  # Spark's CSV reader with multiLine
    assert check_raw_file(RawContract.of(spark_table), LocalRawFile(path)) == ()
    # Athena's CSV readers read one record per line: the same file would split the record in two.
    assert "line 2 has a quoted field that spans lines" in refused(tmp_path, "s.csv", body)


def test_a_table_that_never_quotes_counts_a_quoted_delimiter_as_a_delimiter(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_bytes(b'sale_id,name,amount\n1,"Smith, Al",2\n')
    lazy_simple = replace(TABLE, quote="")  # LazySimpleSerDe
    with pytest.raises(ContractViolation, match="line 2 has 4 fields, the header 3"):
        check_raw_file(RawContract.of(lazy_simple), LocalRawFile(path))
    assert check(tmp_path, "t.csv", b'sale_id,name,amount\n1,"Smith, Al",2\n') == ()  # OpenCSVSerde


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"sale_id,amount\n1,6.5\n", "header lacks column name of table shop_pos_raw.sales"),
        (b"sale_id,amount,name\n1,6.5,ann\n", "columns are in another order"),
        (b"sale_id,name,amount,store\n1,ann,2,7\n", "header has column store not in table"),
        (b"sale_id,name,amount\n1,ann,abc\n", "line 2, column amount: 'abc' is not decimal(10,2)"),
        (b"sale_id,name,amount\n1,ann,1.234\n", "'1.234' is not decimal(10,2)"),
        (b"sale_id,name,amount\n1e999,ann,1\n", "'1e999' is not bigint"),
        (b"sale_id,name,amount\n99999999999999999999,ann,1\n", "is not bigint"),
        (b"sale_id;name;amount\n1;ann;2\n", "header lacks column"),
        (b"sale_id,name,amount\n1,ann\n", "line 2 has 2 fields, the header 3"),
        (b'sale_id,name,amount\n1,"ann,2\n', "line 2 is not valid CSV: unexpected end of data"),
        (b"sale_id,name,sale_id\n1,a,2\n", "header repeats column sale_id"),
        (b"sale_id,name,amount\n1,caf\xe9,2\n", "is not valid utf-8"),
        (b"", "is empty"),
    ],
)
def test_a_csv_that_would_load_into_the_wrong_columns_or_as_null_is_refused(
    tmp_path: Path, body: bytes, reason: str
) -> None:
    assert reason in refused(tmp_path, "day=1/s.csv", body)


def test_the_reason_names_the_file(tmp_path: Path) -> None:
    assert refused(tmp_path, "s.csv", b"sale_id\n1\n").startswith(f"{tmp_path / 's.csv'}: ")


def test_the_declared_encoding_is_the_one_read(tmp_path: Path) -> None:
    assert check(tmp_path, "s.csv", b"sale_id,name,amount\n1,caf\xe9,2\n", encoding="latin-1") == ()


@pytest.mark.parametrize(
    ("name", "body", "reason"),
    [
        ("notes.txt", b"sale_id,name,amount\n1,a,2\n", "cannot tell its format from its name"),
        ("s.csv", b"PAR1" + b"\0" * 20 + b"PAR1", "is a parquet file named as csv"),
        ("s.parquet", b"PAR1" + b"\0" * 20 + b"PAR1", "is a parquet file; table shop_pos_raw.sales reads csv"),
        ("s.json", b'{"sale_id": 1}\n', "is a json file; table shop_pos_raw.sales reads csv"),
    ],
)
def test_a_file_of_another_format_is_refused(tmp_path: Path, name: str, body: bytes, reason: str) -> None:
    assert reason in refused(tmp_path, name, body)


def test_add_columns_accepts_new_columns_after_the_tables_and_returns_them(tmp_path: Path) -> None:
    body = b"sale_id,name,amount,store\n1,ann,2,7\n"
    assert check(tmp_path, "s.csv", body, evolution="add-columns") == (Column("store", "string"),)
    # A new column before the table's: read by name (through a copy in the table's order), with it added.
    with pytest.raises(ColumnsByName, match="another order") as moved:
        check(tmp_path, "t.csv", b"store,sale_id,name,amount\n7,1,a,2\n", evolution="add-columns")
    assert moved.value.added == (Column("store", "string"),)
    assert moved.value.header == ("store", "sale_id", "name", "amount")


def test_columns_in_another_order_are_checked_by_name_before_the_file_is_read_by_name(tmp_path: Path) -> None:
    with pytest.raises(ColumnsByName):
        check(tmp_path, "s.csv", b"amount,Name,sale_id\n2.50,ann,1\n")
    # Each value against its own column's type, whatever the position.
    assert "line 2, column sale_id: 'ann' is not bigint" in refused(
        tmp_path, "s.csv", b"name,sale_id,amount\nx,ann,1\n"
    )
    assert "line 2, column amount: 'x' is not decimal(10,2)" in refused(
        tmp_path, "s.csv", b"amount,name,sale_id\nx,ann,1\n"
    )


JSON_TABLE = TableSchema("raw", "events", (Column("id", "bigint"), Column("tags", "array<string>")), format="json")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"id": 1, "tags": ["a"]}\n[1]\n', "line 2 is not a JSON object"),
        (b'{"id": 1}\n{"id": "x"}\n', "line 2, column id: '\"x\"' is not bigint"),
        (b'{"id": 1, "tagz": []}\n', "key tagz not in table raw.events"),
        (b'{"id": 1\n', "line 1 is not JSON"),
        (b'{"id": 1}\n{"ID": 1, "id": 2}\n', "line 2 has key 'id' twice ('ID' and 'id')"),
        (b'{"id": 1, "id": 2}\n', "line 1 has key 'id' twice ('id' and 'id')"),
        (b'{"id": 1, "tags": [{"A": 1, "a": 2}]}\n', "line 1 has key 'a' twice ('A' and 'a')"),
    ],
)
def test_json_lines_are_checked_by_key_and_type(tmp_path: Path, body: bytes, reason: str) -> None:
    path = tmp_path / "e.jsonl"
    path.write_bytes(body)
    with pytest.raises(ContractViolation, match=None) as caught:
        check_raw_file(RawContract.of(JSON_TABLE), LocalRawFile(path))
    assert reason in str(caught.value)


def test_json_keys_of_another_case_keep_the_contract_and_are_read_through_a_copy(tmp_path: Path) -> None:
    """Athena's JSON SerDes match keys to columns ignoring case; Spark's reader would read NULL, so
    the file is read by name (``stage_a.by_name`` spells its keys as the table does)."""
    path = tmp_path / "e.json"
    path.write_bytes(b'{"id": 1, "tags": ["a"]}\n{"ID": 2, "Tags": ["b"]}\n')
    with pytest.raises(ColumnsByName, match=r"line 2, key 'ID' is spelled 'id' in table raw\.events") as moved:
        check_raw_file(RawContract.of(JSON_TABLE), LocalRawFile(path))
    assert moved.value.added == ()
    path.write_bytes(b'{"id": 1, "Till": "t1"}\n')  # a new column is added lower-cased: its key is respelled
    with pytest.raises(ColumnsByName, match="key 'Till' is spelled 'till' as a column") as grown:
        check_raw_file(RawContract.of(JSON_TABLE, evolution="add-columns"), LocalRawFile(path))
    assert grown.value.added == (Column("till", "string"),)
    path.write_bytes(b'{"ID": "x"}\n')  # a value of another type is refused all the same
    with pytest.raises(ContractViolation, match="column id: '\"x\"' is not bigint") as refused:
        check_raw_file(RawContract.of(JSON_TABLE), LocalRawFile(path))
    assert not isinstance(refused.value, ColumnsByName)


NESTED_JSON = TableSchema(
    "raw",
    "orders",
    (
        Column("id", "bigint"),
        Column("ship", "struct<city:string,zip:int,geo:struct<lat:double,lon:double>>"),
        Column("lines", "array<struct<sku:string,qty:int>>"),
        Column("attrs", "map<string,array<decimal(5,2)>>"),
    ),
    format="json",
)
GOOD_ORDER = (
    b'{"id": 1, "ship": {"city": "Oslo", "zip": 150, "geo": {"lat": 59.9, "lon": 10}}, '
    b'"lines": [{"sku": "a", "qty": 2}, {"sku": "b"}], "attrs": {"w": [1.25, null]}}\n'
    b'{"id": 2, "ship": null, "lines": [], "attrs": {}}\n'
)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"ship": {"city": "Oslo", "zip": "0150"}}', "line 2, field ship.zip: '\"0150\"' is not int"),
        (b'{"ship": {"geo": {"lat": "59.9"}}}', "field ship.geo.lat: '\"59.9\"' is not double"),
        (b'{"ship": {"town": "Oslo"}}', "column ship has key 'town', which its type"),
        (b'{"ship": "Oslo"}', "column ship: '\"Oslo\"' is not struct<"),
        (b'{"lines": [{"sku": "a", "qty": 1.5}]}', "field lines[].qty: '1.5' is not int"),
        (b'{"lines": {"sku": "a"}}', "column lines: "),
        (b'{"lines": [{"sku": "a", "price": 1}]}', "field lines[] has key 'price'"),
        (b'{"attrs": {"w": [1.234]}}', "field attrs[w][]: '1.234' is not decimal(5,2)"),
        (b'{"attrs": {"w": 1}}', "field attrs[w]: '1' is not array<decimal(5,2)>"),
        (b'{"attrs": {"w": [0.1000000000000000001]}}', "field attrs[w][]: '0.1000000000000000001' is not decimal"),
    ],
)
def test_nested_json_values_are_checked_to_the_leaf(tmp_path: Path, line: bytes, reason: str) -> None:
    path = tmp_path / "o.json"
    path.write_bytes(GOOD_ORDER.splitlines(keepends=True)[0] + line + b"\n")
    with pytest.raises(ContractViolation) as caught:
        check_raw_file(RawContract.of(NESTED_JSON), LocalRawFile(path))
    assert reason in str(caught.value)


def test_nested_json_that_reads_as_written_passes(tmp_path: Path) -> None:
    path = tmp_path / "o.json"
    path.write_bytes(GOOD_ORDER)
    assert check_raw_file(RawContract.of(NESTED_JSON), LocalRawFile(path)) == ()
    # A struct field's key of another case is read by name too (the first is named).
    path.write_bytes(b'{"id": 1}\n{"ship": {"city": "Oslo", "geo": {"Lat": 1}}, "lines": [{"SKU": "a"}]}\n')
    with pytest.raises(ColumnsByName, match=r"line 2, field ship\.geo\.Lat is spelled 'lat' in the table"):
        check_raw_file(RawContract.of(NESTED_JSON), LocalRawFile(path))


def test_json_numbers_are_checked_as_written_not_as_doubles(tmp_path: Path) -> None:
    table = TableSchema("raw", "t", (Column("big", "decimal(20,2)"), Column("d", "double")), format="json")
    path = tmp_path / "t.json"
    path.write_bytes(b'{"big": 999999999999999999.99, "d": 0.1000000000000000001}\n')
    assert check_raw_file(RawContract.of(table), LocalRawFile(path)) == ()
    path.write_bytes(b'{"big": 1234567890123456.781}\n')
    with pytest.raises(ContractViolation, match=r"column big: '1234567890123456\.781' is not decimal"):
        check_raw_file(RawContract.of(table), LocalRawFile(path))


BOM = b"\xef\xbb\xbf"  # what Excel's "CSV UTF-8" writes before the header


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_column_name(tmp_path: Path) -> None:
    assert check(tmp_path, "s.csv", BOM + b"sale_id,name,amount\n1,ann,2.50\n") == ()
    assert check(tmp_path, "s.csv.gz", gzip.compress(BOM + b"sale_id,name,amount\n1,ann,2.50\n")) == ()
    # Read by name: the copy in the table's order is written without the mark.
    path = tmp_path / "moved.csv"
    path.write_bytes(BOM + b"amount,name,sale_id\n2.50,ann,1\n")
    contract = RawContract.of(TABLE)
    with pytest.raises(ColumnsByName):
        check_raw_file(contract, LocalRawFile(path))  # type: ignore[arg-type]
    with in_table_order(contract, LocalRawFile(path)) as copy:  # type: ignore[arg-type]
        assert copy.read() == b"sale_id,name,amount\r\n1,ann,2.50\r\n"
    # Only at the start of the file and only for UTF-8: elsewhere the mark is a character of the value.
    latin = refused(tmp_path, "s.csv", BOM + b"sale_id,name,amount\n", encoding="latin-1")
    assert "header lacks column sale_id" in latin
