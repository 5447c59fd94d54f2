"""Hive type strings (what Glue, Athena and Spark's catalog give for a column) as trees, so a nested
column can be compared field by field: ``struct<city:string,zip:bigint>``, ``array<struct<...>>``,
``map<string,int>``, ``decimal(12,2)``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from lakeline.errors import InvalidInputError

COMPLEX = ("struct", "array", "map")
_TOKEN = re.compile(r"\s*(`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*(?:\s*\(\s*\d+\s*(?:,\s*\d+\s*)?\))?|[<>,:])")


@dataclass(frozen=True)
class HiveType:
    """``family`` is struct, array, map, or the primitive type as written (lowercase); ``fields`` are a
    struct's (name, type), an array's element (name ``""``), a map's key and value (``key``, ``value``)."""

    family: str
    fields: tuple[tuple[str, HiveType], ...] = ()

    def __str__(self) -> str:
        if self.family == "struct":
            return "struct<" + ",".join(f"{name}:{kind}" for name, kind in self.fields) + ">"
        if self.family in ("array", "map"):
            return f"{self.family}<" + ",".join(str(kind) for _, kind in self.fields) + ">"
        return self.family


def parse_hive_type(text: str) -> HiveType:
    """The tree of a Hive type string; an ``InvalidInputError`` names what cannot be read."""
    tokens = _tokens(text)
    kind, at = _parse(tokens, 0, text)
    if at != len(tokens):
        raise InvalidInputError(f"type {text!r} has {''.join(tokens[at:])!r} after its end")
    return kind


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    at = 0
    while at < len(text):
        if text[at:].strip() == "":
            break
        found = _TOKEN.match(text, at)
        if found is None:
            raise InvalidInputError(f"type {text!r} cannot be read at {text[at:]!r}")
        tokens.append(found.group(1))
        at = found.end()
    return tokens


def _expect(tokens: list[str], at: int, token: str, text: str) -> int:
    if at >= len(tokens) or tokens[at] != token:
        raise InvalidInputError(f"type {text!r}: expected {token!r}")
    return at + 1


def _parse(tokens: list[str], at: int, text: str) -> tuple[HiveType, int]:
    if at >= len(tokens):
        raise InvalidInputError(f"type {text!r} ends early")
    name = re.sub(r"\s+", "", tokens[at]).lower()
    at += 1
    if name not in COMPLEX:
        return HiveType(name), at
    at = _expect(tokens, at, "<", text)
    fields: list[tuple[str, HiveType]] = []
    while True:
        label = ""
        if name == "struct":
            label = tokens[at].strip("`").replace("``", "`") if at < len(tokens) else ""
            at = _expect(tokens, at + 1, ":", text)
        elif name == "map":
            label = ("key", "value")[min(len(fields), 1)]
        kind, at = _parse(tokens, at, text)
        fields.append((label, kind))
        if at < len(tokens) and tokens[at] == ",":
            at += 1
            continue
        break
    at = _expect(tokens, at, ">", text)
    expected = {"array": 1, "map": 2}.get(name)
    if expected is not None and len(fields) != expected:
        raise InvalidInputError(f"type {text!r}: {name} takes {expected} type(s)")
    return HiveType(name, tuple(fields)), at
