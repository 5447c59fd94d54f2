"""Files read by name: a copy of a file in its table's column order and spelling, loaded in its place.

Athena's SerDes and Spark read a CSV table by position, so a file whose header names the table's
columns in another order (``stage_a.contract.ColumnsByName``) would load its values into the wrong
columns. The door writes a copy next to it, ``<name>.lakeline-by-name.csv[.gz]``, with the same
values under the header in the table's order (and the columns it adds after them), in the table's
dialect and encoding. The copy arrives like any file (its S3 event, or the local flow's), passes the
door and is loaded; the original is never loaded.

JSON lines the same way: Athena's JSON SerDes match keys to columns (and struct fields) ignoring case,
Spark's reader with their case, where ``Store`` reads NULL in a column ``store``. A JSON file with a key
spelled otherwise than its table gets a copy, ``<name>.lakeline-by-name.json[l][.gz]``, whose keys are
spelled as the table's columns and fields (a column it adds: lower-cased), with the same values (numbers
as written; strings JSON-escaped to ASCII); map keys are data and stay as they are. Every runtime then
reads the same rows as Athena reads from the original.

Once a file has a copy, every later version of it goes through a copy too, even in the table's order:
the loaded key is the copy's, so a new version replaces the copy's rows instead of adding its own (and
a version loaded before the copy existed is left out of the partition from then on: ``stage_a.plan``).
A copy records the version (S3 sequencer) it was made from and is written only if its place holds
what the router read, so a redelivery writes nothing and an older version never replaces a newer
version's copy (``stage_a.start.admit``).

The raw table itself still lists the original (read by position) next to its copy: stage A reads only
the files it accepted (``"$path" IN (...)``), but a query of the raw table sees both.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import re
from collections.abc import Generator, Iterator
from decimal import Decimal
from typing import IO, Any, cast

from lakeline.errors import InvalidInputError
from stage_a.arrivals import Arrival
from stage_a.contract import ContractViolation, RawContract, RawFile, RepeatedKey, csv_records, json_object
from stage_a.hive_types import HiveType, parse_hive_type

MARKER = ".lakeline-by-name"
_HEX = re.compile(r"[0-9A-Fa-f]+")
_CHUNK_BYTES = 1024 * 1024  # the copy is made (and held) this much at a time
BY_NAME_MAX_BYTES = 64 * 1000 * 1000
"""The largest file (as stored) the router copies by name: a 100 MB CSV's copy takes ~8 s and a JSON
file's ~18 s on one shared core (``benchmarks/door.py``), three times that on the router's 512 MB."""
COPIED_SUFFIXES = (".csv.gz", ".csv", ".json.gz", ".json", ".jsonl.gz", ".jsonl")


def copy_key(key: str) -> str | None:
    """Where the copy of ``key`` in its table's order goes; ``None`` if ``key`` is itself a copy or neither
    CSV nor JSON."""
    folder, _, name = key.rpartition("/")
    lowered = name.lower()
    if MARKER in lowered:
        return None
    suffix = next((end for end in COPIED_SUFFIXES if lowered.endswith(end)), None)
    if suffix is None:
        return None
    # The suffix in lower case: the router may write only "*.lakeline-by-name.*" (IAM matches case).
    copy = f"{name[: -len(suffix)]}{MARKER}{suffix}"
    return f"{folder}/{copy}" if folder else copy


def copy_version(arrival: Arrival) -> str:
    """What a copy records of the file version it was made from: the S3 sequencer (ordered), else a
    digest of the arrival (S3 metadata is ASCII)."""
    return arrival.sequencer or hashlib.sha256(arrival.identity.encode()).hexdigest()


def newer_version(version: str, than: str) -> bool:
    """Whether ``version`` is a later version of the same key than ``than``. S3 sequencers order the
    events of one key once the shorter is right-padded with zeros; anything else is taken as newer
    (a local flow writes its copies one at a time)."""
    if not (_HEX.fullmatch(version) and _HEX.fullmatch(than)):
        return version != than
    width = max(len(version), len(than))
    return version.upper().ljust(width, "0") > than.upper().ljust(width, "0")


def _dialect(contract: RawContract) -> dict[str, object]:
    if contract.quote:
        return {"delimiter": contract.delimiter, "quotechar": contract.quote, "doublequote": True}
    return {"delimiter": contract.delimiter, "quoting": csv.QUOTE_NONE, "quotechar": None}


def in_table_order(contract: RawContract, raw: RawFile) -> IO[bytes]:
    """``raw`` (already checked against ``contract``) as its table reads it by name: a CSV file's columns
    in the table's order, then the columns it adds in its own order; a JSON file's keys spelled as the
    table's. A readable binary stream at its start, made as it is read (never held whole, in memory or
    in ``/tmp``: a file of any size streams through). Past the door's sample the records were not read
    yet: one that breaks the file's structure raises ``ContractViolation`` from ``read``, naming its line.
    A file over ``BY_NAME_MAX_BYTES`` is refused at once: its copy would not be made within the router's
    time, which would retry it until it is dead-lettered with no reason."""
    size, limit = raw.size(), BY_NAME_MAX_BYTES
    if size > limit:
        raise ContractViolation(
            f"{raw.name}: is read by name (another column order or key spelling than table {contract.table}), "
            f"and at {size:,} bytes it is over the {limit:,} the router copies within its time "
            "limit: send it in the table's order and spelling, or in files of at most that size"
        )
    return cast(IO[bytes], io.BufferedReader(_Produced(_copy_chunks(contract, raw)), buffer_size=_CHUNK_BYTES))


class _Produced(io.RawIOBase):
    """The bytes of a generator of chunks, as a stream; closing it closes the generator (and its file)."""

    def __init__(self, chunks: Generator[bytes, None, None]) -> None:
        self._chunks = chunks
        self._pending = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = memoryview(chunk)
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

    def close(self) -> None:
        self._chunks.close()
        super().close()


def _copy_chunks(contract: RawContract, raw: RawFile) -> Generator[bytes, None, None]:
    """The copy's bytes, a chunk of about ``_CHUNK_BYTES`` at a time (compressed as the file is)."""
    sink = io.BytesIO()
    compressed = raw.name.lower().endswith(".gz")
    with raw.open() as binary:
        source = cast(IO[bytes], gzip.GzipFile(fileobj=binary)) if compressed else binary
        text = io.TextIOWrapper(source, encoding=contract.reading_encoding, errors="strict", newline="")
        target = cast(IO[bytes], gzip.GzipFile(fileobj=sink, mode="wb", mtime=0)) if compressed else sink
        out = io.TextIOWrapper(target, encoding=contract.encoding, errors="strict", newline="")
        records = (
            _json_in_table_spelling(contract, raw.name, text, out)
            if contract.format == "json"
            else _csv_in_table_order(contract, raw.name, text, out)
        )
        try:
            for _ in records:
                if sink.tell() >= _CHUNK_BYTES:
                    yield _drained(sink)
        except UnicodeDecodeError as error:
            raise ContractViolation(f"{raw.name}: is not valid {contract.encoding} ({error.reason})") from error
        except (OSError, EOFError) as error:
            raise ContractViolation(f"{raw.name}: cannot be read: {error}") from error
        out.flush()
        out.detach()
        if compressed:
            target.close()  # writes the gzip trailer into the sink
    yield _drained(sink)


def _drained(sink: io.BytesIO) -> bytes:
    chunk = sink.getvalue()
    sink.seek(0)
    sink.truncate()
    return chunk


def _csv_in_table_order(contract: RawContract, file_name: str, text: IO[str], out: IO[str]) -> Iterator[None]:
    """Writes the copy a record at a time, yielding after each. The records past the door's sample get
    the door's structural checks here (fields per record, one line per record where the table's readers
    read so), as the copy is the file that is loaded."""
    reader = csv.reader(text, strict=True, **_dialect(contract))  # type: ignore[arg-type]
    header = next(reader)
    names = [name.strip().lower() for name in header]
    table = [column.name.lower() for column in contract.columns]
    order = [names.index(name) for name in table] + [i for i, name in enumerate(names) if name not in table]
    # RFC 4180's CRLF: the writer then quotes a value holding a bare CR as well as one holding LF
    # (before Python 3.13 it quotes only the characters of its line terminator).
    writer = csv.writer(out, lineterminator="\r\n", **_dialect(contract))  # type: ignore[arg-type]
    writer.writerow([header[i].strip() for i in order])
    for _, record in csv_records(reader, contract, file_name, len(names)):
        writer.writerow([record[i] for i in order])
        yield


def _json_in_table_spelling(contract: RawContract, file_name: str, text: IO[str], out: IO[str]) -> Iterator[None]:
    columns = {column.name.lower(): (column.name, _tree(column.type)) for column in contract.columns}
    for number, line in enumerate(text, start=1):
        if not line.strip():
            out.write(line)  # as the readers read it
            continue
        try:
            record = json.loads(line, parse_float=Decimal, object_pairs_hook=json_object)
        except json.JSONDecodeError as error:  # past the door's sample: a line that is not JSON
            raise ContractViolation(f"{file_name}: line {number} is not JSON: {error.msg}") from error
        except RepeatedKey as repeated:
            first, second = repeated.keys
            raise ContractViolation(
                f"{file_name}: line {number} has key {second!r} twice ({first!r} and {second!r})"
            ) from None
        if not isinstance(record, dict):
            raise ContractViolation(f"{file_name}: line {number} is not a JSON object")
        spelled: dict[str, object] = {}
        for key, value in record.items():
            name, tree = columns.get(key.lower(), (key.lower(), None))  # a column it adds: lower-cased
            spelled[name] = _spelled(tree, value)
        out.write(_json_text(spelled) + "\n")
        yield


def _tree(kind: str) -> HiveType | None:
    try:
        return parse_hive_type(kind)
    except InvalidInputError:  # a type this reader cannot read: its struct fields were not checked either
        return None


def _spelled(tree: HiveType | None, value: object) -> object:
    """``value`` with each struct field's key spelled as ``tree`` spells the field."""
    if tree is None or value is None:
        return value
    if tree.family == "array" and isinstance(value, list):
        ((_, element),) = tree.fields
        return [_spelled(element, item) for item in value]
    if tree.family == "map" and isinstance(value, dict):
        (_, _), (_, value_type) = tree.fields
        return {key: _spelled(value_type, item) for key, item in value.items()}
    if tree.family == "struct" and isinstance(value, dict):
        fields = {name.lower(): (name, field_type) for name, field_type in tree.fields}
        spelled: dict[str, object] = {}
        for key, item in value.items():
            name, field_type = fields.get(key.lower(), (key, None))  # the contract refused a key it lacks
            spelled[name] = _spelled(field_type, item)
        return spelled
    return value


def _json_text(value: object) -> str:
    """``value`` as JSON, its numbers as written (read as ``int`` and ``Decimal``)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(key)}:{_json_text(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json_text(item) for item in value) + "]"
    if isinstance(value, Decimal):
        return str(value)
    return json.dumps(value)  # ASCII: the copy is written in the file's encoding, which may be narrower
