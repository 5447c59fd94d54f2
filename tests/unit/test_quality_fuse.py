"""Rules measured together (#41, cost): the counted rules (IsComplete, ColumnValues, RowCount) fused into one
aggregate per version, written for Athena (Trino) and Spark alike, and split by measured size so that no
statement nears Athena's 262,144 bytes however many and long the rules are. What the fused statements return
is tested against the per-rule statements on Spark (tests/spark/test_quality_spark.py)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from lakeline.quality import parse_rule
from lakeline.quality.rules import Rule
from lakeline.quality.sql import (
    ATHENA_STATEMENT_LIMIT,
    COMPILED_DIALECTS,
    FUSED_STATEMENT_BYTES,
    MAX_IN_VALUES,
    MAX_VALUE_BYTES,
    TableRef,
    fuse,
    row_tally,
)
from tests.unit.test_quality_rules import EVERY_KIND, VERSION

READERS = {"athena": "trino", "spark": "spark"}


def _rules(texts: list[str]) -> list[tuple[int, Rule]]:
    return list(enumerate(parse_rule(text) for text in texts))


def test_the_counted_rules_are_the_ones_of_a_single_pass_aggregate() -> None:
    fusable = [text for text in EVERY_KIND if row_tally(parse_rule(text)) is not None]
    assert fusable == [text for text in EVERY_KIND if text.startswith(("IsComplete", "ColumnValues", "RowCount "))]
    with pytest.raises(ValueError, match="IsUnique is not measured by counting rows"):
        fuse(_rules(['IsComplete "a"', 'IsUnique "a"']), VERSION)


def test_every_counted_rule_fuses_into_one_statement_both_dialects_read_back() -> None:
    rules = [(position, rule) for position, rule in _rules(EVERY_KIND) if row_tally(rule) is not None]
    (statement,) = fuse(rules, VERSION)
    assert statement.positions == tuple(position for position, _ in rules)
    for dialect in COMPILED_DIALECTS:
        sql = statement.sql(dialect)
        parsed = sqlglot.parse_one(sql, read=READERS[dialect])
        assert {(t.db, t.name) for t in parsed.find_all(exp.Table)} == {("shop", "orders")}, "one scan, of the version"
        assert sql.count("'2026-11-29'") == 1, "of its partition"
        assert isinstance(parsed, exp.Select)
        assert [e.alias_or_name for e in parsed.expressions] == [
            name for position, _ in rules for name in (f"metric_{position}", f"passed_{position}")
        ]


def _long_list(rules: int) -> list[str]:
    """``rules`` ColumnValues rules of the longest ``in`` lists allowed (each value all quotes, doubled by
    escaping): each compiles to over 200,000 bytes."""
    value = "'" * MAX_VALUE_BYTES
    values = ", ".join(f'"{value}"' for _ in range(MAX_IN_VALUES))
    return [f'ColumnValues "c{i}" not in [{values}]' for i in range(rules)]


@pytest.mark.parametrize(("rules", "budget"), [(100, FUSED_STATEMENT_BYTES), (20, 3_000), (20, 600)])
def test_many_long_rules_split_greedily_by_measured_size(rules: int, budget: int) -> None:
    values = ", ".join(f'"value {i:03d}"' for i in range(40))  # ~600 bytes a rule
    texts = [f'ColumnValues "c{i}" in [{values}]' for i in range(rules)] + ["RowCount > 0", 'IsComplete "c1"']
    statements = fuse(_rules(texts), VERSION, budget=budget)
    assert [p for s in statements for p in s.positions] == list(range(len(texts))), "every rule once, in order"
    sizes = [max(len(s.sql(d).encode()) for d in COMPILED_DIALECTS) for s in statements]
    assert all(size <= budget for size in sizes) or budget == 600, sizes
    if budget == FUSED_STATEMENT_BYTES:
        assert len(statements) == 1
    else:
        assert len(statements) > 1
        # Greedy: each statement but the last would have gone over the budget with the next rule.
        for statement, size in zip(statements[:-1], sizes[:-1], strict=True):
            grown = fuse(_rules(texts)[statement.positions[0] : statement.positions[-1] + 2], VERSION, budget=10**9)
            assert max(len(grown[0].sql(d).encode()) for d in COMPILED_DIALECTS) > budget, size
    if budget == 600:  # smaller than one rule: each alone
        assert len(statements) == len(texts) - 1  # RowCount's part is small enough to join the last
        assert statements[-1].positions == (len(texts) - 2, len(texts) - 1)


def test_the_largest_rules_allowed_each_go_alone_and_stay_under_athenas_limit() -> None:
    texts = ["RowCount > 0", *_long_list(3)]
    statements = fuse(_rules(texts), VERSION)
    assert [s.positions for s in statements] == [(0,), (1,), (2,), (3,)]
    for statement in statements[1:]:
        for dialect in COMPILED_DIALECTS:
            assert FUSED_STATEMENT_BYTES < len(statement.sql(dialect).encode()) < ATHENA_STATEMENT_LIMIT


def test_a_table_of_another_partition_is_the_one_read() -> None:
    other = TableRef.of("shop", "orders", {"dt": "2026-11-30"})
    (statement,) = fuse(_rules(['IsComplete "a"', "RowCount > 0"]), other)
    assert "'2026-11-30'" in statement.sql() and "'2026-11-29'" not in statement.sql()
