"""Files of any size at the door (#39): the check reads a bounded amount of each file, and the by-name
copy streams. The bound is set small here, so small files stand for large ones."""

from __future__ import annotations

import gzip
import io
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

import stage_a.by_name as by_name
import stage_a.contract as contract_module
from lakeline.engines.base import TableSchema
from stage_a.by_name import in_table_order
from stage_a.contract import ColumnsByName, ContractViolation, RawContract, check_raw_file
from stage_a.raw_files import LocalRawFile
from tests.unit.test_raw_contract import TABLE

JSON_TABLE = TableSchema(
    database=TABLE.database, table=TABLE.table, columns=TABLE.columns, partition_columns=(), format="json"
)
BOUND = 200  # characters of text the door reads in these tests


@pytest.fixture
def small_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contract_module, "DOOR_CHECK_CHARACTERS", BOUND)


class _Counted(io.RawIOBase):
    def __init__(self, handle: IO[bytes], counter: CountingFile) -> None:
        self._handle, self._counter = handle, counter

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._handle.read(len(buffer))
        self._counter.bytes_read += len(data)
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._handle.close()
        super().close()


@dataclass
class CountingFile:
    """A real local file that counts the bytes read from it."""

    path: Path
    bytes_read: int = 0

    @property
    def name(self) -> str:
        return str(self.path)

    def size(self) -> int:
        return LocalRawFile(self.path).size()

    def read_range(self, start: int, end: int) -> bytes:
        return LocalRawFile(self.path).read_range(start, end)

    def open(self) -> IO[bytes]:
        return io.BufferedReader(_Counted(self.path.open("rb"), self))


def csv_rows(count: int, first: int = 1) -> bytes:
    return b"".join(b"%d,name %d,%d.25\n" % (n, n, n % 1000) for n in range(first, first + count))


def json_rows(count: int) -> bytes:
    return b"".join(b'{"sale_id": %d, "name": "n%d", "amount": 1.25}\n' % (n, n) for n in range(1, count + 1))


def test_a_file_within_the_bound_is_checked_to_its_last_line(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_bytes(b"sale_id,name,amount\n" + csv_rows(2000) + b"x,late,1\n")
    with pytest.raises(ContractViolation, match="line 2002, column sale_id: 'x' is not bigint"):
        check_raw_file(RawContract.of(TABLE), LocalRawFile(path))


@pytest.mark.usefixtures("small_bound")
@pytest.mark.parametrize("name", ["s.csv", "s.csv.gz"])
def test_a_csv_file_over_the_bound_is_decided_from_its_header_and_a_sample_read_of_it(
    tmp_path: Path, name: str
) -> None:
    path = tmp_path / name

    def write(body: bytes) -> None:
        path.write_bytes(gzip.compress(body) if name.endswith(".gz") else body)

    write(b"sale_id,name,amount\n" + csv_rows(100_000) + b"x,late,1\n")
    raw = CountingFile(path)
    assert check_raw_file(RawContract.of(TABLE), raw) == ()  # the bad last line is past the sample
    assert raw.bytes_read < 64 * 1024 < path.stat().st_size  # a bounded read, not the file
    # Within the sample, every refusal stands as it was.
    write(b"sale_id,name,amount\n" + csv_rows(3) + b"y,early,1\n" + csv_rows(100_000))
    with pytest.raises(ContractViolation, match="line 5, column sale_id: 'y' is not bigint"):
        check_raw_file(RawContract.of(TABLE), LocalRawFile(path))
    write(b"sale_id,amount\n" + csv_rows(100_000))
    with pytest.raises(ContractViolation, match="header lacks column name"):
        check_raw_file(RawContract.of(TABLE), LocalRawFile(path))


@pytest.mark.usefixtures("small_bound")
def test_the_sample_ends_with_a_whole_record_never_inside_a_quoted_field(tmp_path: Path) -> None:
    spanning = b'1,"' + b"a" * BOUND + b'\nb",2\n'  # the bound falls inside the quoted field
    path = tmp_path / "s.csv"
    path.write_bytes(b"sale_id,name,amount\n" + spanning + csv_rows(1000))
    multiline = RawContract.of(TableSchema(**{**TABLE.__dict__, "multiline_fields": True}))
    assert check_raw_file(multiline, LocalRawFile(path)) == ()


@pytest.mark.usefixtures("small_bound")
def test_a_json_file_over_the_bound_is_decided_from_a_sample(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(json_rows(100_000) + b'{"sale_id": "late"}\n')
    raw = CountingFile(path)
    assert check_raw_file(RawContract.of(JSON_TABLE), raw) == ()
    assert raw.bytes_read < 64 * 1024 < path.stat().st_size
    path.write_bytes(json_rows(2) + b'{"sale_id": 1.5}\n' + json_rows(100_000))
    with pytest.raises(ContractViolation, match=r"line 3, column sale_id: '1\.5' is not bigint"):
        check_raw_file(RawContract.of(JSON_TABLE), LocalRawFile(path))


def test_the_by_name_copy_is_made_as_it_is_read_never_held_whole(tmp_path: Path) -> None:
    path = tmp_path / "moved.csv"
    rows = b"".join(b"name %d,%d,%d.25\n" % (n, n, n % 1000) for n in range(1, 400_000))
    path.write_bytes(b"name,sale_id,amount\n" + rows)
    raw = CountingFile(path)
    with pytest.raises(ColumnsByName):
        check_raw_file(RawContract.of(TABLE), LocalRawFile(path))
    with in_table_order(RawContract.of(TABLE), raw) as copy:
        assert copy.readline() == b"sale_id,name,amount\r\n"
        assert raw.bytes_read < path.stat().st_size // 2  # not spooled: read as the copy is
        assert copy.readline() == b"1,name 1,1.25\r\n"
        rest = copy.read()
    assert rest.endswith(b"399999,name 399999,999.25\r\n") and raw.bytes_read == path.stat().st_size


@pytest.mark.usefixtures("small_bound")
@pytest.mark.parametrize(
    ("name", "tail", "reason"),
    [
        ("moved.csv", b"late,9\n", "line 1002 has 2 fields, the header 3"),
        ("moved.csv", b'late,"9\n",1\n', "line 1002 has a quoted field that spans lines"),
        ("moved.json", b"{not json\n", "line 1001 is not JSON"),
        ("moved.json", b"[1]\n", "line 1001 is not a JSON object"),
        ("moved.json", b'{"Name": "a", "NAME": "b"}\n', "line 1001 has key 'NAME' twice ('Name' and 'NAME')"),
    ],
)
def test_a_record_past_the_sample_that_breaks_the_files_structure_stops_its_copy_with_the_reason(
    tmp_path: Path, name: str, tail: bytes, reason: str
) -> None:
    path = tmp_path / name
    if name.endswith(".csv"):
        table, head = TABLE, b"name,sale_id,amount\n" + b"".join(b"n%d,%d,1\n" % (n, n) for n in range(1000))
    else:
        table, head = JSON_TABLE, b"".join(b'{"Name": "n%d", "sale_id": %d}\n' % (n, n) for n in range(1000))
    path.write_bytes(head + tail)
    contract = RawContract.of(table)
    with pytest.raises(ColumnsByName):
        check_raw_file(contract, LocalRawFile(path))  # the sample keeps the contract
    with in_table_order(contract, LocalRawFile(path)) as copy, pytest.raises(ContractViolation) as stopped:
        copy.read()
    assert str(stopped.value).startswith(f"{path}: {reason}")


def test_a_file_too_large_to_copy_within_the_routers_time_is_refused_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(by_name, "BY_NAME_MAX_BYTES", 1000)
    path = tmp_path / "moved.csv"
    path.write_bytes(b"name,sale_id,amount\n" + b"".join(b"n%d,%d,1\n" % (n, n) for n in range(1000)))
    with pytest.raises(ContractViolation) as refused:
        in_table_order(RawContract.of(TABLE), LocalRawFile(path))
    size = f"{path.stat().st_size:,}"
    assert str(refused.value) == (
        f"{path}: is read by name (another column order or key spelling than table shop_pos_raw.sales), and at "
        f"{size} bytes it is over the 1,000 the router copies within its time limit: send it in the table's order "
        "and spelling, or in files of at most that size"
    )
