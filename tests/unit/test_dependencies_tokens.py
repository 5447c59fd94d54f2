"""$token substitution: whole names only, one pass, quoted identifiers left alone, glued tokens found, $$ escapes."""

from __future__ import annotations

import pytest

from lakeline.dependencies.tokens import find_tokens, substitute_tokens, undefined_tokens
from lakeline.errors import InvalidInputError


def test_longer_tokens_are_not_clobbered_by_shorter_ones() -> None:
    sql = "SELECT '$start_date', '$start_date_x', $start_date_x2 FROM t"
    values = {"$start_date": "20220114", "$start_date_x": "20220110"}
    assert substitute_tokens(sql, values) == "SELECT '20220114', '20220110', $start_date_x2 FROM t"


def test_an_undefined_longer_token_is_left_whole_and_reported() -> None:
    template = "WHERE d = '$start_date_x' AND e = '$start_date'"
    assert substitute_tokens(template, {"$start_date": "1"}) == "WHERE d = '$start_date_x' AND e = '1'"
    assert undefined_tokens(template, {"$start_date"}) == ["$start_date_x"]


def test_values_are_not_substituted_again() -> None:
    assert substitute_tokens("$a $b", {"$a": "$b", "$b": "x"}) == "$b x"


def test_quoted_pseudo_columns_are_not_tokens() -> None:
    sql = "SELECT * FROM raw WHERE \"$path\" = 's3://b/k' AND d = $end_date"
    assert find_tokens(sql) == ["$end_date"]
    assert substitute_tokens(sql, {"$path": "nope", "$end_date": "1"}).startswith('SELECT * FROM raw WHERE "$path"')


def test_every_occurrence_and_token_order() -> None:
    sql = "$x $y $x"
    assert find_tokens(sql) == ["$x", "$y"]
    assert substitute_tokens(sql, {"$x": "1", "$y": "2"}) == "1 2 1"
    assert substitute_tokens(sql, {}) == sql


def test_token_names_are_checked() -> None:
    with pytest.raises(InvalidInputError, match="not a token name"):
        substitute_tokens("x", {"start": "1"})


def test_tokens_glued_to_text_before_them_are_tokens() -> None:
    # Issue 17: these were neither substituted nor reported, and the literal landed in every row.
    sql = "SELECT 'v_$day', 'x$end_date', v$day FROM t"
    assert find_tokens(sql) == ["$day", "$end_date"]
    assert substitute_tokens(sql, {"$day": "20220120", "$end_date": "20220110"}) == (
        "SELECT 'v_20220120', 'x20220110', v20220120 FROM t"
    )
    assert undefined_tokens(sql, {"$day"}) == ["$end_date"]


def test_a_doubled_dollar_is_a_literal_dollar_and_never_a_token() -> None:
    sql = "SELECT '$$start_date', '$$$day', regexp_like(x, 'a$$') FROM t"
    assert find_tokens(sql) == ["$day"]
    assert undefined_tokens(sql, set()) == ["$day"]
    assert substitute_tokens(sql, {"$start_date": "no", "$day": "1"}) == (
        "SELECT '$start_date', '$1', regexp_like(x, 'a$') FROM t"
    )


def test_a_dollar_that_starts_no_name_is_left_alone() -> None:
    sql = "SELECT regexp_like(x, '^a$'), '$1', '$ x' FROM t"
    assert find_tokens(sql) == []
    assert substitute_tokens(sql, {"$x": "no"}) == sql
