"""The raw table's contract, checked at the door: every arriving file against its table, before any SQL.

The contract is the raw table as the catalog has it (columns, types, format; locally the first file of
a table made it) and the table's settings (``encoding``, ``schema_evolution``). Engines read a raw
file by its table, CSV by position: a file that does not match is loaded into the wrong columns or as
NULLs, silently. So a file is refused, with a one-line reason naming the file and the column, when:

- its format (by content, then by name) is not the table's;
- CSV: the header lacks a column of the table or repeats one, has one the table lacks (unless
  ``add-columns``), a record has another number of fields than the header (RFC 4180:
  quoted fields may hold the delimiter, doubled quotes and newlines), the bytes are not valid in the
  declared encoding, or a value cannot be read as its column's type;
- JSON lines: a line is not a JSON object, a key is not a column, or a value has another type, down
  to the fields of structs, arrays and maps (a key a struct lacks is refused: the engines drop it), or
  an object has two keys equal ignoring case (the OpenX SerDe fails such a line: "Duplicate key");
- Parquet: a column of the table is missing, or has a type the engines cannot read as the column's,
  down to the fields of structs, arrays and maps (a struct field missing or extra is refused: the
  engines read struct fields by name and would give NULL or drop it).

A CSV file whose header names the table's columns in another order keeps its contract, but engines
would read it by position: ``ColumnsByName`` says so, and the caller loads a copy in the table's order
(``stage_a.by_name``). So does a JSON file with a key spelled in another case than its column or struct
field (``Store`` for ``store``): Athena's JSON SerDes match keys ignoring case, Spark's reader with
their case (it would read NULL), so the copy spells every key as the table does.

With ``schema_evolution: add-columns`` extra columns are accepted and returned, for the caller to add
to the table before the file is planned (a CSV file's come after the table's, in their header order).

The door reads a bounded amount of each file, so that a file of any size is decided within the
router's time and memory: a Parquet file's footer (two ranged reads); a CSV or JSON file's text up to
``DOOR_CHECK_CHARACTERS`` (decompressed), to the end of the record in which the bound is reached. A file
within the bound is checked whole; of a larger one, the header and the records of that first part (a
sample). The records past the sample are not type-checked at the door: a CSV or JSON-lines file's every
value is, by the engine, before the run's CTAS (``stage_a.type_check``, ``docs/stage-a.md``; a quoted JSON
number is the one thing that check cannot tell from a number).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import IO, Literal, Protocol, cast

from lakeline.engines.base import Column, TableSchema
from lakeline.errors import InvalidInputError
from lakeline.settings import SchemaEvolution
from stage_a.hive_types import COMPLEX, HiveType, parse_hive_type
from stage_a.parquet_schema import MAGIC, ParquetFormatError, footer_length, parquet_columns

RawFormat = Literal["csv", "json", "parquet"]
SUFFIXES: dict[str, RawFormat] = {".csv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}
_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_INTEGER_RANGES = {"tinyint": 7, "smallint": 15, "int": 31, "integer": 31, "bigint": 63}
_WIDER = {"tinyint": 0, "smallint": 1, "int": 2, "integer": 2, "bigint": 3, "float": 10, "double": 11}
_MAX_REPORTED_VALUE = 40
DOOR_CHECK_CHARACTERS = 4 * 1024 * 1024
"""How much of a CSV or JSON file's text the door checks (read at each call, so a test can set it small).
Python checks typed CSV at ~3 MB/s on one shared core (``benchmarks/door.py``), and a 512 MB Lambda has
under a third of a vCPU: a batch of ten files at the bound is decided within the router's minute."""


class ContractViolation(InvalidInputError):
    """An arriving file does not match its raw table; nothing was planned or executed for it."""


class ColumnsByName(ContractViolation):
    """A file that keeps its contract but that an engine would read otherwise than by its names: a CSV
    file naming the table's columns in another order (or putting the columns it adds among them), read
    by position; a JSON file with a key spelled in another case than the table's, which Spark reads as
    NULL. ``stage_a.by_name`` writes a copy in the table's order and spelling, which is loaded in its
    place. A caller that does not make the copy refuses the file with this reason."""

    def __init__(self, reason: str, *, header: tuple[str, ...] = (), added: tuple[Column, ...]) -> None:
        super().__init__(reason)
        self.header = header
        self.added = added


class RawFile(Protocol):
    """Read access to one arriving object (a local file or an S3 object)."""

    @property
    def name(self) -> str:
        """As the user knows it: a path or an s3:// URI."""
        ...

    def size(self) -> int: ...

    def read_range(self, start: int, end: int) -> bytes: ...

    def open(self) -> IO[bytes]: ...


@dataclass(frozen=True)
class RawContract:
    table: str  # db.table
    format: RawFormat
    columns: tuple[Column, ...]
    encoding: str = "utf-8"
    delimiter: str = ","
    quote: str = '"'  # "": fields are never quoted (a quote is data)
    multiline_fields: bool = False
    evolution: SchemaEvolution = "reject"

    @property
    def reading_encoding(self) -> str:
        """The codec a file of this contract is decoded with: UTF-8 skips a leading byte-order mark, as
        Excel's "CSV UTF-8" writes one before the header and Athena's and Spark's readers skip it."""
        return "utf-8-sig" if self.encoding == "utf-8" else self.encoding

    @classmethod
    def of(cls, schema: TableSchema, *, encoding: str = "utf-8", evolution: SchemaEvolution = "reject") -> RawContract:
        fmt = schema.format or "csv"
        if fmt not in ("csv", "json", "parquet"):
            raise InvalidInputError(f"raw table {schema.database}.{schema.table} is {fmt}: not csv, json or parquet")
        return cls(
            table=f"{schema.database}.{schema.table}",
            format=fmt,  # type: ignore[arg-type]
            columns=schema.columns,
            encoding=encoding,
            delimiter=schema.delimiter or ",",
            quote=schema.quote,
            multiline_fields=schema.multiline_fields,
            evolution=evolution,
        )


def file_format(name: str) -> RawFormat | None:
    lowered = name.lower().removesuffix(".gz")
    return next((fmt for suffix, fmt in SUFFIXES.items() if lowered.endswith(suffix)), None)


def check_file_format(raw: RawFile) -> RawFormat:
    """The file's format, by name and content, if they agree and it has any content."""
    return _format_and_size(raw)[0]


def _format_and_size(raw: RawFile) -> tuple[RawFormat, int]:
    named = file_format(raw.name)
    size = raw.size()
    content: RawFormat | None = "parquet" if raw.read_range(0, min(size, 4)) == MAGIC else None
    if named is None:
        known = ", ".join(sorted(SUFFIXES))
        raise ContractViolation(f"{raw.name}: cannot tell its format from its name (known: {known})")
    if content is not None and content != named:
        raise ContractViolation(f"{raw.name}: is a {content} file named as {named}")
    if size == 0:
        raise ContractViolation(f"{raw.name}: is empty")
    return named, size


def check_raw_file(contract: RawContract, raw: RawFile) -> tuple[Column, ...]:
    """Refuse ``raw`` with a ``ContractViolation`` naming what is wrong, or return the columns it adds
    (only under ``add-columns``; otherwise always empty)."""
    found, size = _format_and_size(raw)  # one size request per file (a HEAD on S3)
    if found != contract.format:
        raise ContractViolation(f"{raw.name}: is a {found} file; table {contract.table} reads {contract.format}")
    if found == "parquet":
        return _check_parquet(contract, raw, size)
    with raw.open() as binary:
        stream = cast(IO[bytes], gzip.GzipFile(fileobj=binary)) if raw.name.lower().endswith(".gz") else binary
        text = io.TextIOWrapper(stream, encoding=contract.reading_encoding, errors="strict", newline="")
        bounded = _Bounded(text, DOOR_CHECK_CHARACTERS)
        try:
            if found == "csv":
                return _check_csv(contract, raw.name, bounded)
            return _check_json(contract, raw.name, bounded)
        except UnicodeDecodeError as error:
            raise ContractViolation(f"{raw.name}: is not valid {contract.encoding} ({error.reason})") from error
        except (OSError, EOFError) as error:
            raise ContractViolation(f"{raw.name}: cannot be read: {error}") from error


class _Bounded:
    """A text's lines, counting what was read: ``spent`` once ``limit`` characters were, so the check
    stops at the end of that record (a quoted field may span lines: never inside one)."""

    def __init__(self, text: IO[str], limit: int) -> None:
        self._text = text
        self._limit = limit
        self.read = 0

    @property
    def spent(self) -> bool:
        return self.read >= self._limit

    def __iter__(self) -> Iterator[str]:
        for line in self._text:
            self.read += len(line)
            yield line


def _new_columns(contract: RawContract, file_name: str, extra: list[str], where: str) -> tuple[Column, ...]:
    if not extra:
        return ()
    if contract.evolution == "reject":
        raise ContractViolation(
            f"{file_name}: {where} {', '.join(extra)} not in table {contract.table} "
            "(schema_evolution: reject; set add-columns to add them)"
        )
    return tuple(Column(name, "string") for name in extra)


def _check_csv(contract: RawContract, file_name: str, text: _Bounded) -> tuple[Column, ...]:
    if contract.quote:
        reader = csv.reader(text, delimiter=contract.delimiter, quotechar=contract.quote, doublequote=True, strict=True)
    else:
        reader = csv.reader(text, delimiter=contract.delimiter, quoting=csv.QUOTE_NONE, strict=True)
    try:
        header = next(reader, None)
    except csv.Error as error:
        raise ContractViolation(f"{file_name}: header is not valid CSV: {error}") from error
    if not header:
        raise ContractViolation(f"{file_name}: has no header line")
    names = [name.strip().lower() for name in header]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise ContractViolation(f"{file_name}: header repeats column {', '.join(duplicated)}")
    expected = [column.name.lower() for column in contract.columns]
    missing = [name for name in expected if name not in names]
    if missing:
        raise ContractViolation(f"{file_name}: header lacks column {', '.join(missing)} of table {contract.table}")
    in_order = names[: len(expected)] == expected
    added = _new_columns(contract, file_name, [name for name in names if name not in expected], "header has column")
    kinds = {name: column.type for name, column in zip(expected, contract.columns, strict=True)}
    types = [kinds.get(name, "string") for name in names]
    for first, record in csv_records(reader, contract, file_name, len(names)):
        for name, kind, value in zip(names, types, record, strict=True):
            if value != "" and not _reads_as(kind, value):
                raise ContractViolation(f"{file_name}: line {first}, column {name}: {_shown(value)} is not {kind}")
        if text.spent:
            break  # a sample of a large file: the rest is not read at the door
    if not in_order:
        raise ColumnsByName(
            f"{file_name}: columns are in another order than table {contract.table}'s "
            f"({', '.join(names)} instead of {', '.join(expected)}); CSV is read by position",
            header=tuple(header),
            added=added,
        )
    return added


class RepeatedKey(Exception):
    """Two keys of one JSON object equal ignoring case (raised by ``json_object``)."""

    def __init__(self, first: str, second: str) -> None:
        super().__init__(first, second)
        self.keys = (first, second)


def json_object(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object whose keys differ ignoring case (``json.loads``' ``object_pairs_hook``): Athena's
    SerDes match keys ignoring case, and the OpenX SerDe fails a line with two such keys."""
    if len({key.lower() for key, _ in pairs}) == len(pairs):  # the common case, at C speed
        return dict(pairs)
    seen: dict[str, str] = {}
    for key, _ in pairs:
        if key.lower() in seen:
            raise RepeatedKey(seen[key.lower()], key)
        seen[key.lower()] = key
    raise AssertionError("unreachable: a key repeats")


def _check_json(contract: RawContract, file_name: str, text: _Bounded) -> tuple[Column, ...]:
    types = {column.name.lower(): column.type for column in contract.columns}
    names = {column.name.lower(): column.name for column in contract.columns}
    trees = {name: _hive_type(kind) for name, kind in types.items()}
    extra: dict[str, None] = {}
    respelled: list[str] = []  # where a key is first spelled otherwise than the table spells it
    for number, line in enumerate(text, start=1):
        if not line.strip():
            continue
        try:
            # A number as written, not as a double.
            record = json.loads(line, parse_float=Decimal, object_pairs_hook=json_object)
        except json.JSONDecodeError as error:
            raise ContractViolation(f"{file_name}: line {number} is not JSON: {error.msg}") from error
        except RepeatedKey as repeated:
            first, second = repeated.keys
            raise ContractViolation(
                f"{file_name}: line {number} has key {second!r} twice ({first!r} and {second!r}): "
                "keys are matched to columns ignoring case, as Athena's JSON SerDes match them"
            ) from None
        if not isinstance(record, dict):
            raise ContractViolation(f"{file_name}: line {number} is not a JSON object")
        for key, value in record.items():
            lowered = key.lower()
            kind = types.get(lowered)
            if kind is None:
                extra.setdefault(lowered)
                if key != lowered and not respelled:  # its column is added lower-cased
                    respelled.append(f"line {number}, key {key!r} is spelled {lowered!r} as a column")
                continue
            if key != names[lowered] and not respelled:
                respelled.append(f"line {number}, key {key!r} is spelled {names[lowered]!r} in table {contract.table}")
            if value is not None:
                unspelled = not respelled
                problem = _json_problem(trees[lowered], kind, value, names[lowered], respelled)
                if problem:
                    raise ContractViolation(f"{file_name}: line {number}, {problem}")
                if unspelled and respelled:  # a struct field's
                    respelled[0] = f"line {number}, {respelled[0]}"
        if text.spent:
            break  # a sample of a large file: the rest is not read at the door
    added = _new_columns(contract, file_name, list(extra), "key")
    if respelled:
        # Spark's JSON reader matches keys with their case: the column would read NULL there.
        raise ColumnsByName(f"{file_name}: {respelled[0]}; Spark matches JSON keys with their case", added=added)
    return added


def _json_problem(tree: HiveType | None, kind: str, value: object, path: str, respelled: list[str]) -> str | None:
    """What makes a JSON value read other than as written into its column's type, to the leaf: a value
    of another type, or a key a struct lacks (the engines drop it). ``None``: it reads as written. The
    first struct field spelled in another case than the table's is added to ``respelled``."""
    where = f"field {path}" if "." in path or "[" in path else f"column {path}"
    if value is None:
        return None
    if tree is None or tree.family not in COMPLEX:
        return None if _json_reads_as(kind, value) else f"{where}: {_shown(_json_text(value))} is not {kind}"
    if tree.family == "array":
        if not isinstance(value, list):
            return f"{where}: {_shown(_json_text(value))} is not {kind}"
        ((_, element),) = tree.fields
        return next(
            (p for item in value if (p := _json_problem(element, str(element), item, f"{path}[]", respelled))),
            None,
        )
    if not isinstance(value, dict):
        return f"{where}: {_shown(_json_text(value))} is not {kind}"
    if tree.family == "map":
        (_, key_type), (_, value_type) = tree.fields
        for key, item in value.items():
            if not _reads_as(str(key_type), str(key)):
                return f"{where}: key {_shown(str(key))} is not {key_type}"
            problem = _json_problem(value_type, str(value_type), item, f"{path}[{key}]", respelled)
            if problem:
                return problem
        return None
    fields = {name.lower(): (name, field_type) for name, field_type in tree.fields}
    for key, item in value.items():
        name, field_type = fields.get(str(key).lower(), ("", None))
        if field_type is None:
            return f"{where} has key {key!r}, which its type {kind} lacks"
        if key != name and not respelled:
            respelled.append(f"field {path}.{key} is spelled {name!r} in the table")
        problem = _json_problem(field_type, str(field_type), item, f"{path}.{name}", respelled)
        if problem:
            return problem
    return None


def _check_parquet(contract: RawContract, raw: RawFile, size: int) -> tuple[Column, ...]:
    try:
        if size < 12:
            raise ParquetFormatError("too short")
        length = footer_length(raw.read_range(size - 8, size))
        if length > size - 12:
            raise ParquetFormatError("footer length is past the start of the file")
        columns = parquet_columns(raw.read_range(size - 8 - length, size - 8))
    except ParquetFormatError as error:
        raise ContractViolation(f"{raw.name}: is not a readable Parquet file: {error}") from error
    found = {column.name.lower(): column.sql_type for column in columns}
    for column in contract.columns:
        actual = found.get(column.name.lower())
        if actual is None:
            raise ContractViolation(f"{raw.name}: lacks column {column.name} of table {contract.table}")
        table_type, file_type = _hive_type(column.type), _hive_type(actual)
        if table_type is None or file_type is None:  # e.g. Spark's "... 6 more fields": the family only
            if _family(column.type) != _family(actual):
                raise ContractViolation(
                    f"{raw.name}: column {column.name} is {actual}, table {contract.table} has {column.type}"
                )
        elif table_type.family in COMPLEX or file_type.family in COMPLEX:
            problem = _nested_problem(table_type, file_type, column.name)
            if problem:
                raise ContractViolation(f"{raw.name}: {problem} (table {contract.table} has {column.type})")
        elif not _type_reads_as(column.type, actual):
            raise ContractViolation(
                f"{raw.name}: column {column.name} is {actual}, table {contract.table} has {column.type}"
            )
    expected = {column.name.lower() for column in contract.columns}
    extra = [column.name.lower() for column in columns if column.name.lower() not in expected]
    added = _new_columns(contract, raw.name, extra, "has column")
    return tuple(Column(column.name, found[column.name]) for column in added)


def _hive_type(text: str) -> HiveType | None:
    """The type's tree, or ``None`` for one this reader cannot read (Spark abbreviates a struct of more
    than 25 fields as ``struct<...,... 6 more fields>``)."""
    try:
        return parse_hive_type(text)
    except InvalidInputError:
        return None


def _nested_problem(table: HiveType, found: HiveType, path: str) -> str | None:
    """What makes a nested file column read other than as the table's (Athena and Spark read a
    Parquet struct's fields by name: a missing field reads as NULL, an extra one is dropped)."""
    if table.family not in COMPLEX and found.family not in COMPLEX:
        return None if _type_reads_as(table.family, found.family) else f"field {path} is {found}, not {table}"
    if table.family != found.family:
        return f"field {path} is {found}, not {table}" if "." in path or "[" in path else f"column {path} is {found}"
    if table.family == "struct":
        fields = {name.lower(): kind for name, kind in found.fields}
        for name, kind in table.fields:
            if name.lower() not in fields:
                return f"column {path} lacks field {path}.{name}"
            problem = _nested_problem(kind, fields[name.lower()], f"{path}.{name}")
            if problem:
                return problem
        known = {name.lower() for name, _ in table.fields}
        extra = [name for name, _ in found.fields if name.lower() not in known]
        return f"column {path} has field {path}.{extra[0]}, which the table lacks" if extra else None
    suffixes = ("[]",) if table.family == "array" else ("[key]", "[value]")
    for suffix, (_, kind), (_, found_kind) in zip(suffixes, table.fields, found.fields, strict=True):
        problem = _nested_problem(kind, found_kind, f"{path}{suffix}")
        if problem:
            return problem
    return None


def _family(kind: str) -> str:
    kind = kind.strip().lower()
    for complex_type in ("struct", "array", "map"):
        if kind.startswith(complex_type):
            return complex_type
    if kind.startswith(("varchar", "char")):
        return "string"
    if kind.startswith("decimal"):
        return kind.replace(" ", "")
    return {"integer": "int", "timestamp_ntz": "timestamp"}.get(kind, kind)


def _type_reads_as(table_type: str, file_type: str) -> bool:
    """Whether Athena and Spark both read a file column of ``file_type`` as ``table_type``."""
    table, found = _family(table_type), _family(file_type)
    if table == found:
        return True
    if table in _WIDER and found in _WIDER:  # widening within integers, or within floating point
        return (_WIDER[table] >= 10) == (_WIDER[found] >= 10) and _WIDER[table] >= _WIDER[found]
    if table.startswith("decimal(") and found.startswith("decimal("):
        (p1, s1), (p2, s2) = (tuple(int(x) for x in t[8:-1].split(",")) for t in (table, found))
        return s1 >= s2 and p1 - s1 >= p2 - s2
    return False


def _reads_as(kind: str, value: str) -> bool:
    """Whether a CSV field holds a value of the column's type (an empty field is NULL, checked before)."""
    family = _family(kind)
    text = value.strip()
    if family in _INTEGER_RANGES:
        bits = _INTEGER_RANGES[family]
        return bool(_INTEGER.fullmatch(text)) and -(2**bits) <= int(text) < 2**bits
    if family in ("double", "float"):
        return bool(_NUMBER.fullmatch(text)) and math.isfinite(float(text))
    if family.startswith("decimal("):
        precision, scale = (int(x) for x in family[8:-1].split(","))
        if not _NUMBER.fullmatch(text):
            return False
        number = Decimal(text)
        return number == number.quantize(Decimal(1).scaleb(-scale)) and abs(number) < Decimal(10) ** (precision - scale)
    if family == "boolean":
        return text.lower() in ("true", "false")
    if family == "date":
        return bool(_DATE.fullmatch(text)) and _parses(date.fromisoformat, text)
    if family == "timestamp":
        return bool(_DATE.match(text)) and _parses(datetime.fromisoformat, text)
    return True


def _json_reads_as(kind: str, value: object) -> bool:
    family = _family(kind)
    if family in _INTEGER_RANGES:
        return isinstance(value, int) and not isinstance(value, bool) and _reads_as(family, str(value))
    if family in ("double", "float") or family.startswith("decimal("):
        number = isinstance(value, (int, float, Decimal)) and not isinstance(value, bool) and math.isfinite(value)
        # A decimal column takes the number as written: no more decimals, no more digits than it holds.
        return number and (not family.startswith("decimal(") or _reads_as(family, str(value)))
    if family == "boolean":
        return isinstance(value, bool)
    if family in ("string", "date", "timestamp"):
        return isinstance(value, str) and (family == "string" or _reads_as(family, value))
    if family == "struct" or family == "map":
        return isinstance(value, dict)
    if family == "array":
        return isinstance(value, list)
    return True


def _json_text(value: object) -> str:
    """A JSON value as written (its numbers were read as ``Decimal``)."""
    return str(value) if isinstance(value, Decimal) else json.dumps(value, default=float)


def _parses(parse: Callable[[str], object], text: str) -> bool:
    try:
        parse(text)
    except ValueError:
        return False
    return True


def csv_records(
    reader: Iterator[list[str]], contract: RawContract, file_name: str, width: int
) -> Iterator[tuple[int, list[str]]]:
    """The records of a CSV reader positioned after the header, each with the line it starts on, once it
    has the header's ``width`` fields and (unless the table's readers take them) no line break inside a
    field; blank lines are no records. A record that breaks the file raises ``ContractViolation``."""
    line = reader.line_num  # type: ignore[attr-defined]
    try:
        for record in reader:
            first, line = line + 1, reader.line_num  # type: ignore[attr-defined]
            if line > first and not contract.multiline_fields:
                raise ContractViolation(
                    f"{file_name}: line {first} has a quoted field that spans lines; "
                    f"the readers of table {contract.table} read one record per line"
                )
            if not record:
                continue  # a blank line is no record
            if len(record) != width:
                raise ContractViolation(f"{file_name}: line {first} has {len(record)} fields, the header {width}")
            yield first, record
    except csv.Error as error:
        raise ContractViolation(f"{file_name}: line {reader.line_num} is not valid CSV: {error}") from error  # type: ignore[attr-defined]


def _shown(value: str) -> str:
    return repr(value if len(value) <= _MAX_REPORTED_VALUE else value[:_MAX_REPORTED_VALUE] + "…")
