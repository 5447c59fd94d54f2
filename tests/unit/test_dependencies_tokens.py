"""$token substitution: whole names only, one pass, quoted identifiers left alone."""

from __future__ import annotations

import pytest

from lakeline.dependencies.tokens import find_unsubstituted_tokens, substitute_tokens
from lakeline.errors import ValidationError


def test_longer_tokens_are_not_clobbered_by_shorter_ones() -> None:
    sql = "SELECT '$start_date', '$start_date_x', $start_date_x2 FROM t"
    values = {"$start_date": "20220114", "$start_date_x": "20220110"}
    assert substitute_tokens(sql, values) == "SELECT '20220114', '20220110', $start_date_x2 FROM t"


def test_an_undefined_longer_token_is_left_whole_and_reported() -> None:
    sql = substitute_tokens("WHERE d = '$start_date_x' AND e = '$start_date'", {"$start_date": "1"})
    assert sql == "WHERE d = '$start_date_x' AND e = '1'"
    assert find_unsubstituted_tokens(sql) == ["$start_date_x"]


def test_values_are_not_substituted_again() -> None:
    assert substitute_tokens("$a $b", {"$a": "$b", "$b": "x"}) == "$b x"


def test_quoted_pseudo_columns_are_not_tokens() -> None:
    sql = "SELECT * FROM raw WHERE \"$path\" = 's3://b/k' AND d = $end_date"
    assert find_unsubstituted_tokens(sql) == ["$end_date"]
    assert substitute_tokens(sql, {"$path": "nope", "$end_date": "1"}).startswith('SELECT * FROM raw WHERE "$path"')


def test_every_occurrence_and_token_order() -> None:
    sql = "$x $y $x"
    assert find_unsubstituted_tokens(sql) == ["$x", "$y"]
    assert substitute_tokens(sql, {"$x": "1", "$y": "2"}) == "1 2 1"
    assert substitute_tokens(sql, {}) == sql


def test_token_names_are_checked() -> None:
    with pytest.raises(ValidationError, match="not a token name"):
        substitute_tokens("x", {"start": "1"})
