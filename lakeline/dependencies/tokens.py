"""``$token`` substitution in step SQL.

The rule, the same for substitution and for the checks that every token is defined:

- ``$`` then a letter or ``_`` starts a token, wherever it is: ``'v_$day'`` and ``x$end_date`` hold the
  token ``$day`` / ``$end_date``, so text glued before a token never hides it.
- The name runs as far as letters, digits and ``_`` go: ``$start_date_x`` is the token
  ``$start_date_x``, never ``$start_date`` followed by ``_x``, so an undefined longer name is reported
  instead of being half-replaced. Text glued *after* a token needs a character that cannot be in a name.
- ``$$`` is a literal ``$``: ``'$$start_date'`` becomes ``'$start_date'`` and is not a token.
- ``$`` right after a double quote is Athena's pseudo-column (``"$path"``), a quoted identifier, not a token.
- Any other ``$`` (before a digit, a quote, a space, the end) is left as it is.

Substitution is one pass over the text, so a substituted value is never substituted again.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping

from lakeline.errors import InvalidInputError

TOKEN_PATTERN = re.compile(r"^\$[A-Za-z_][A-Za-z0-9_]*$")
_SCAN = re.compile(r'\$\$|(?<!")\$[A-Za-z_][A-Za-z0-9_]*')
BUILTIN_TOKENS = ("$target_database", "$target_table", "$partition_column", "$partition_value", "$environment")
"""Tokens every step may use besides its item's ``date_substitutions`` (values: ``builtin_token_values``)."""


def builtin_token_values(
    dataset: str, partition_column: str, partition_value: str | None, environment: str
) -> dict[str, str]:
    """The built-in tokens of one target partition (``$partition_value`` only when it is known)."""
    database, table = dataset.split(".")
    values = {
        "$target_database": database,
        "$target_table": table,
        "$partition_column": partition_column,
        "$environment": environment,
    }
    if partition_value is not None:
        values["$partition_value"] = partition_value
    return values


def _tokens(sql: str) -> Iterator[str]:
    for match in _SCAN.finditer(sql):
        if match.group(0) != "$$":
            yield match.group(0)


def find_tokens(sql: str) -> list[str]:
    """The distinct ``$tokens`` of a step's SQL (before substitution), in order of first appearance."""
    return list(dict.fromkeys(_tokens(sql)))


def undefined_tokens(sql: str, defined: Collection[str]) -> list[str]:
    """The tokens of ``sql`` that are not in ``defined``, in order of first appearance."""
    return [token for token in find_tokens(sql) if token not in defined]


def substitute_tokens(sql: str, values: Mapping[str, str]) -> str:
    """Replace every defined ``$token`` by its value and every ``$$`` by ``$``; undefined tokens stay."""
    for token in values:
        if not TOKEN_PATTERN.fullmatch(token):
            raise InvalidInputError(f"{token!r} is not a token name ($ then a letter or '_')")

    def replace(match: re.Match[str]) -> str:
        text = match.group(0)
        return "$" if text == "$$" else values.get(text, text)

    return _SCAN.sub(replace, sql)
