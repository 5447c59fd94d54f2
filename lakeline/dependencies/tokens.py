"""``$token`` substitution in step SQL.

A token ends where the identifier ends: ``$start_date`` never matches inside ``$start_date_x``, so an
undefined longer token is left in place for ``find_unsubstituted_tokens`` to report instead of being
half-replaced. Substitution is one pass over the text, so a substituted value is never substituted again.
Tokens right after a double quote (Athena's ``"$path"`` pseudo-column) are quoted identifiers, not tokens.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from lakeline.errors import ValidationError

_TOKEN_BODY = r"\$[A-Za-z_][A-Za-z0-9_]*(?![A-Za-z0-9_])"
ANY_TOKEN = re.compile(rf'(?<!["A-Za-z0-9_$]){_TOKEN_BODY}')
TOKEN_NAME = re.compile(r"^\$[A-Za-z_][A-Za-z0-9_]*$")


def substitute_tokens(sql: str, values: Mapping[str, str]) -> str:
    """Replace every defined ``$token`` in ``sql`` by its value (longest names first, whole names only)."""
    for token in values:
        if not TOKEN_NAME.fullmatch(token):
            raise ValidationError(f"{token!r} is not a token name ($ then a letter or '_')")
    if not values:
        return sql
    names = "|".join(re.escape(token[1:]) for token in sorted(values, key=len, reverse=True))
    pattern = re.compile(rf'(?<!["A-Za-z0-9_$])\$(?:{names})(?![A-Za-z0-9_])')
    return pattern.sub(lambda match: values[match.group(0)], sql)


def find_unsubstituted_tokens(sql: str) -> list[str]:
    """The distinct ``$tokens`` still in ``sql``, in order of first appearance."""
    return list(dict.fromkeys(ANY_TOKEN.findall(sql)))
