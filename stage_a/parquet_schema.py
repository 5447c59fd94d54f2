"""The top-level columns of a Parquet file and their SQL types, read from its footer.

The footer is Thrift (compact protocol) ``FileMetaData``; only its ``schema`` list is decoded, and the
rest is never read. It runs where no compiled Parquet library can (the stage A router on Lambda), from
two ranged reads: the last 8 bytes, then the footer. Spec: apache/parquet-format ``parquet.thrift``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from stage_a.hive_types import COMPLEX

MAGIC = b"PAR1"

# parquet.thrift: Type, ConvertedType, and the LogicalType union's member ids.
_BOOLEAN, _INT32, _INT64, _INT96, _FLOAT, _DOUBLE, _BYTE_ARRAY, _FIXED = range(8)
_CONVERTED = {0: "string", 5: "decimal", 6: "date", 9: "timestamp", 10: "timestamp", 15: "tinyint", 16: "smallint"}
_LOGICAL = {1: "string", 5: "decimal", 6: "date", 8: "timestamp", 4: "string", 12: "string"}


class ParquetFormatError(ValueError):
    """The bytes are not a Parquet file this reader understands."""


@dataclass(frozen=True)
class ParquetColumn:
    name: str
    sql_type: str  # the Hive/Athena type: bigint, decimal(p,s), struct<city:string,zip:bigint>, array<int>, ...


class _Compact:
    """Just enough of Thrift's compact protocol to read structs, skipping what is not asked for."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def byte(self) -> int:
        if self.at >= len(self.data):
            raise ParquetFormatError("footer ends early")
        value = self.data[self.at]
        self.at += 1
        return value

    def varint(self) -> int:
        shift = result = 0
        while True:
            value = self.byte()
            result |= (value & 0x7F) << shift
            if not value & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise ParquetFormatError("varint too long")

    def zigzag(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def binary(self) -> bytes:
        size = self.varint()
        if self.at + size > len(self.data):
            raise ParquetFormatError("footer ends early")
        value = self.data[self.at : self.at + size]
        self.at += size
        return value

    def struct(self, visit: Callable[[int, int], bool]) -> None:
        """Read one struct: ``visit(field_id, type)`` reads a field it wants and returns True; any
        field it returns False for is skipped."""
        last = 0
        while True:
            header = self.byte()
            kind = header & 0x0F
            if kind == 0:
                return
            delta = header >> 4
            field_id = last + delta if delta else self.zigzag()
            last = field_id
            if not visit(field_id, kind):
                self.skip(kind)

    def skip(self, kind: int) -> None:
        if kind in (1, 2):  # booleans live in the field header
            return
        if kind == 3:
            self.at += 1
        elif kind in (4, 5, 6):
            self.varint()
        elif kind == 7:
            self.at += 8
        elif kind == 8:
            self.binary()
        elif kind in (9, 10):
            size, element = self.list_header()
            for _ in range(size):
                self.skip_element(element)
        elif kind == 11:
            size = self.varint()
            if size:
                types = self.byte()
                for _ in range(size):
                    self.skip_element(types >> 4)
                    self.skip_element(types & 0x0F)
        elif kind == 12:
            self.struct(lambda _field, _kind: False)
        else:
            raise ParquetFormatError(f"unknown Thrift type {kind}")

    def skip_element(self, kind: int) -> None:
        if kind in (1, 2):
            self.at += 1  # a boolean in a collection is a byte
        else:
            self.skip(kind)

    def list_header(self) -> tuple[int, int]:
        header = self.byte()
        size = header >> 4
        if size == 15:
            size = self.varint()
        return size, header & 0x0F


@dataclass
class _Element:
    name: str = ""
    physical: int | None = None
    children: int = 0
    converted: int | None = None
    logical: int | None = None
    bit_width: int | None = None
    precision: int | None = None
    scale: int | None = None
    repetition: int | None = None  # 0 required, 1 optional, 2 repeated


def _element(reader: _Compact) -> _Element:
    element = _Element()

    def logical_type(field_id: int, kind: int) -> bool:
        if kind != 12:
            return False
        element.logical = field_id
        if field_id == 10:  # INTEGER {1: bitWidth i8, 2: isSigned bool}

            def integer(inner: int, inner_kind: int) -> bool:
                if inner == 1 and inner_kind == 3:
                    element.bit_width = struct.unpack("b", bytes([reader.byte()]))[0]
                    return True
                return False

            reader.struct(integer)
            return True
        return False

    def visit(field_id: int, kind: int) -> bool:
        if field_id == 1 and kind == 5:
            element.physical = reader.zigzag()
        elif field_id == 3 and kind == 5:
            element.repetition = reader.zigzag()
        elif field_id == 4 and kind == 8:
            element.name = reader.binary().decode("utf-8", errors="replace")
        elif field_id == 5 and kind == 5:
            element.children = reader.zigzag()
        elif field_id == 6 and kind == 5:
            element.converted = reader.zigzag()
        elif field_id == 7 and kind == 5:
            element.scale = reader.zigzag()
        elif field_id == 8 and kind == 5:
            element.precision = reader.zigzag()
        elif field_id == 10 and kind == 12:
            reader.struct(logical_type)
        else:
            return False
        return True

    reader.struct(visit)
    return element


def _sql_type(element: _Element) -> str:
    if element.children or element.physical is None:
        if element.converted == 3 or element.logical == 3:
            return "array"
        if element.converted in (1, 2) or element.logical == 2:
            return "map"
        return "struct"
    named = _LOGICAL.get(element.logical or -1) or _CONVERTED.get(
        element.converted if element.converted is not None else -1
    )
    if named == "decimal":
        return f"decimal({element.precision},{element.scale})"
    if named:
        return named
    if element.logical == 10 and element.bit_width in (8, 16):
        return "tinyint" if element.bit_width == 8 else "smallint"
    return {
        _BOOLEAN: "boolean",
        _INT32: "int",
        _INT64: "bigint",
        _INT96: "timestamp",
        _FLOAT: "float",
        _DOUBLE: "double",
        _BYTE_ARRAY: "binary",
        _FIXED: "binary",
    }[element.physical]


def footer_length(tail: bytes) -> int:
    """The footer's length, from a file's last 8 bytes."""
    if len(tail) != 8 or tail[4:] != MAGIC:
        raise ParquetFormatError("no Parquet footer (the file does not end with PAR1)")
    return int(struct.unpack("<I", tail[:4])[0])


def parquet_columns(footer: bytes) -> list[ParquetColumn]:
    """The top-level columns described by a footer (the bytes before its length and magic)."""
    reader = _Compact(footer)
    elements: list[_Element] = []

    def visit(field_id: int, kind: int) -> bool:
        if field_id != 2 or kind != 9:
            return False
        size, element_kind = reader.list_header()
        if element_kind != 12:
            raise ParquetFormatError("schema is not a list of structs")
        elements.extend(_element(reader) for _ in range(size))
        return True

    reader.struct(visit)
    if not elements:
        raise ParquetFormatError("footer has no schema")
    columns: list[ParquetColumn] = []
    index = 1
    for _ in range(elements[0].children):
        if index >= len(elements):
            raise ParquetFormatError("schema ends early")
        top = elements[index]
        kind, index = _nested_type(elements, index)
        columns.append(ParquetColumn(top.name, kind))
    return columns


_REPEATED = 2


def _child(elements: list[_Element], index: int) -> _Element:
    if index >= len(elements):
        raise ParquetFormatError("schema ends early")
    return elements[index]


def _nested_type(elements: list[_Element], index: int, *, element_of_list: bool = False) -> tuple[str, int]:
    """The Hive type of the subtree at ``index`` (``struct<a:bigint>``, ``array<string>``,
    ``map<string,int>``) and the index just past it. Lists and maps follow the spec's LogicalTypes.md,
    including its backward-compatibility rules for two-level lists."""
    element = _child(elements, index)
    family = _sql_type(element)
    if family not in COMPLEX:
        # A repeated primitive outside a LIST's own repeated field is a list of it (spec rule 1).
        listed = element.repetition == _REPEATED and not element_of_list
        return (f"array<{family}>" if listed else family), index + 1
    if family == "struct":
        fields = []
        at = index + 1
        for _ in range(element.children):
            name = _child(elements, at).name
            kind, at = _nested_type(elements, at)
            fields.append(f"{name}:{kind}")
        struct_type = f"struct<{','.join(fields)}>"
        if element.repetition == _REPEATED and not element_of_list:  # a repeated group outside a LIST
            return f"array<{struct_type}>", at
        return struct_type, at
    repeated = _child(elements, index + 1)
    end = _after(elements, index)
    if family == "map":
        if repeated.children != 2:
            raise ParquetFormatError(f"map {element.name} does not hold a key and a value")
        key, at = _nested_type(elements, index + 2)
        value, _ = _nested_type(elements, at)
        return f"map<{key},{value}>", end
    if element.children != 1:
        raise ParquetFormatError(f"list {element.name} does not hold one repeated field")
    if repeated.physical is not None:  # two-level list of primitives
        return f"array<{_sql_type(repeated)}>", end
    if repeated.children > 1 or repeated.name in ("array", f"{element.name}_tuple"):  # two-level list of structs
        kind, _ = _nested_type(elements, index + 1, element_of_list=True)
        return f"array<{kind}>", end
    kind, _ = _nested_type(elements, index + 2)
    return f"array<{kind}>", end


def _after(elements: list[_Element], index: int) -> int:
    """The index just past the subtree rooted at ``index`` (schema elements are a depth-first list)."""
    remaining = elements[index].children
    index += 1
    for _ in range(remaining):
        if index >= len(elements):
            raise ParquetFormatError("schema ends early")
        index = _after(elements, index)
    return index
