"""One DQDL rule, as Glue Data Quality spells it, read into the model of ``lakeline.quality.rules``.

The subset read (``docs/quality.md``): ``IsComplete "c"``, ``IsUnique "c"``, ``ColumnValues "c" <condition>
[with threshold <numeric condition>]``, ``RowCount <numeric condition>``, ``RowCountMatch "alias" <numeric
condition>``, ``ColumnCount <numeric condition>``, ``CustomSql "select ..." [<numeric condition>]``. A
numeric condition is ``= n``, ``!= n``, ``> n``, ``>= n``, ``< n``, ``<= n``, ``between a and b``, ``not
between a and b``, ``in [n, ...]`` or ``not in [n, ...]``; ColumnValues also takes quoted strings and
``NULL``. Anything else DQDL has (composite rules, ``where``, dynamic rules, dates, ``matches``, other rule
types) is refused by name rather than half-read. Rule types and keywords are case-sensitive, as in DQDL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from lakeline.errors import InvalidInputError
from lakeline.names import check_identifier
from lakeline.quality.rules import (
    ColumnCount,
    ColumnValues,
    Condition,
    ConditionOperator,
    CustomSql,
    IsComplete,
    IsUnique,
    Operand,
    RowCount,
    RowCountMatch,
    Rule,
)
from lakeline.quality.sql import MAX_IN_VALUES, MAX_VALUE_BYTES, QualityRuleError, check_custom_sql

RULE_TYPES = ("IsComplete", "IsUnique", "ColumnValues", "RowCount", "RowCountMatch", "ColumnCount", "CustomSql")
_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>"(?:\\["\\]|\\(?!["\\])|[^"\\])*")
      | (?P<number>-?\d+(?:\.\d+)?(?![\w.]))
      | (?P<op>>=|<=|!=|=|>|<)
      | (?P<punct>[\[\],()])
      | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
      | (?P<other>\S)
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Token:
    kind: str  # string, number, op, punct, word, other
    text: str

    @property
    def value(self) -> str:
        """A string's content without its quotes and escapes; any other token's text."""
        if self.kind != "string":
            return self.text
        return re.sub(r"\\([\"\\])", r"\1", self.text[1:-1])


def _tokens(text: str) -> list[_Token]:
    found: list[_Token] = []
    position, end = 0, len(text.rstrip())
    while position < end:
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise ValueError(f"cannot read {text[position:].strip()[:20]!r}")
        kind = match.lastgroup
        assert kind is not None
        found.append(_Token(kind, match.group(kind)))
        position = match.end()
    return found


class _Reader:
    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.at = 0

    def peek(self, offset: int = 0) -> _Token | None:
        index = self.at + offset
        return self.tokens[index] if index < len(self.tokens) else None

    def take(self, what: str) -> _Token:
        token = self.peek()
        if token is None:
            raise ValueError(f"expected {what} at the end")
        self.at += 1
        return token

    def word(self, *words: str) -> bool:
        """Take the next tokens if they are ``words`` (in that order)."""
        for offset, word in enumerate(words):
            token = self.peek(offset)
            if token is None or token.kind != "word" or token.text != word:
                return False
        self.at += len(words)
        return True

    def string(self, what: str) -> str:
        token = self.take(what)
        if token.kind != "string":
            raise ValueError(f"expected {what} in double quotes, got {token.text!r}")
        return token.value

    def done(self) -> bool:
        return self.peek() is None


def parse_rule(text: str) -> Rule:
    """The rule ``text`` states; ``QualityRuleError`` naming it and what is wrong."""
    try:
        return _parse(text)
    except (ValueError, InvalidInputError) as error:
        raise QualityRuleError(f"rule {text.strip()!r}: {error}") from None


def _parse(text: str) -> Rule:
    if not isinstance(text, str) or not text.strip():
        raise ValueError('a rule must be DQDL text such as IsComplete "order_id"')
    reader = _Reader(_tokens(text))
    head = reader.take("a rule type")
    if head.kind == "punct" and head.text == "(":
        raise ValueError("composite rules (and/or) are not supported: list each rule on its own")
    if head.kind != "word" or head.text not in RULE_TYPES:
        raise ValueError(f"unknown or unsupported rule type {head.text!r}; supported: {', '.join(RULE_TYPES)}")
    rule = _rule(head.text, reader)
    if reader.word("where"):
        raise ValueError("'where' clauses are not supported")
    if not reader.done():
        rest = reader.peek()
        assert rest is not None
        raise ValueError(f"unexpected {rest.text!r} after the rule")
    return rule


def _column(reader: _Reader) -> str:
    return check_identifier(reader.string("a column name"), "column")


def _rule(kind: str, reader: _Reader) -> Rule:
    if kind == "IsComplete":
        return IsComplete(_column(reader))
    if kind == "IsUnique":
        return IsUnique(_column(reader))
    if kind == "ColumnValues":
        column = _column(reader)
        condition = _condition(reader, strings=True)
        threshold = _condition(reader, strings=False) if reader.word("with", "threshold") else None
        return ColumnValues(column, condition, threshold)
    if kind == "RowCount":
        return RowCount(_condition(reader, strings=False))
    if kind == "RowCountMatch":
        reference = reader.string("the reference dataset's alias")
        if not reference:
            raise ValueError("the reference dataset's alias is empty")
        return RowCountMatch(reference, _condition(reader, strings=False))
    if kind == "ColumnCount":
        return ColumnCount(_condition(reader, strings=False))
    sql = reader.string("the SQL")
    measured = None if reader.done() else _condition(reader, strings=False)
    check_custom_sql(sql, row_level=measured is None)
    return CustomSql(sql, measured)


_COMPARISONS: dict[str, ConditionOperator] = {"=": "=", "!=": "!=", ">": ">", ">=": ">=", "<": "<", "<=": "<="}


def _operator(reader: _Reader) -> ConditionOperator:
    token = reader.take("a condition (e.g. > 0)")
    if token.kind == "op":
        return _COMPARISONS[token.text]
    if token.kind == "word" and token.text in ("between", "in"):
        return "between" if token.text == "between" else "in"
    if token.kind == "word" and token.text == "not" and reader.word("between"):
        return "not between"
    if token.kind == "word" and token.text == "not" and reader.word("in"):
        return "not in"
    if token.kind == "word" and token.text == "matches":
        raise ValueError("'matches' is not supported")
    raise ValueError(f"expected a condition (=, !=, >, >=, <, <=, between, in, not in), got {token.text!r}")


def _value(reader: _Reader, *, strings: bool) -> Operand:
    token = reader.take("a value")
    if token.kind == "number":
        return Decimal(token.text)
    if strings and token.kind == "word" and token.text in ("NULL", "null"):
        return None
    if strings and token.kind == "string":
        if len(token.value.encode()) > MAX_VALUE_BYTES:
            raise ValueError(f"a value is longer than {MAX_VALUE_BYTES} bytes: {token.value[:20]!r}...")
        return token.value
    if token.kind == "punct" and token.text == "(":
        raise ValueError("expressions (dates, now(), dynamic rules) are not supported; write a number")
    wanted = "a number, a double-quoted string or NULL" if strings else "a number"
    raise ValueError(f"expected {wanted}, got {token.text!r}")


def _list(reader: _Reader, *, strings: bool) -> tuple[Operand, ...]:
    opening = reader.take("[")
    if opening.text != "[":
        raise ValueError(f"expected a list in [ ], got {opening.text!r}")
    values: list[Operand] = []
    while True:
        values.append(_value(reader, strings=strings))
        separator = reader.take("]")
        if separator.text == "]":
            break
        if separator.text != ",":
            raise ValueError(f"expected ',' or ']' in the list, got {separator.text!r}")
    if len(values) > MAX_IN_VALUES:
        raise ValueError(f"the list has {len(values)} values, more than the {MAX_IN_VALUES} allowed")
    return tuple(values)


def _condition(reader: _Reader, *, strings: bool) -> Condition:
    operator = _operator(reader)
    if operator in ("in", "not in"):
        operands = _list(reader, strings=strings)
    elif operator in ("between", "not between"):
        low = _value(reader, strings=False)
        if not reader.word("and"):
            raise ValueError("expected 'and' in 'between a and b'")
        operands = (low, _value(reader, strings=False))
    else:
        # Only equality takes a string or NULL; an order needs a number.
        operands = (_value(reader, strings=strings and operator in ("=", "!=")),)
    kinds = {type(value) for value in operands if value is not None}
    if len(kinds) > 1:
        raise ValueError("a condition's values must all be numbers or all be strings")
    return Condition(operator, operands)
