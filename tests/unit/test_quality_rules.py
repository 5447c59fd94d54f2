"""Quality rules (#41): DQDL read as Glue spells it, invalid rules refused by name, and each rule compiled
to SQL that Athena's dialect (Trino) and Spark SQL both read back, within Athena's statement size."""

from __future__ import annotations

from decimal import Decimal

import pytest
import sqlglot
from sqlglot import exp

from lakeline.errors import InvalidInputError
from lakeline.quality import QualityRuleError, TableRef, compile_rule, parse_checks, parse_rule
from lakeline.quality.rules import (
    ColumnCount,
    ColumnValues,
    Condition,
    CustomSql,
    IsComplete,
    IsUnique,
    RowCount,
    RowCountMatch,
)
from lakeline.quality.sql import ATHENA_STATEMENT_LIMIT, MAX_CUSTOM_SQL_BYTES, MAX_IN_VALUES, MAX_VALUE_BYTES

D = Decimal
VERSION = TableRef.of("shop", "orders", {"dt": "2026-11-29"})
PUBLISHED = TableRef.of("shop", "orders_published", {"dt": "2026-11-29"})

EVERY_KIND = [
    'IsComplete "order_id"',
    'IsUnique "order_id"',
    'ColumnValues "country" in ["FR", "DE", NULL]',
    'ColumnValues "country" not in ["XX"]',
    'ColumnValues "qty" between 0 and 100',
    'ColumnValues "qty" not between 0 and 100',
    'ColumnValues "qty" >= 1 with threshold > 0.9',
    'ColumnValues "country" = "FR"',
    'ColumnValues "country" != NULL',
    "RowCount > 3",
    "RowCount between 1 and 1000",
    'RowCountMatch "reference" >= 0.9',
    "ColumnCount = 4",
    'CustomSql "select count(*) from primary where qty < 0" = 0',
    'CustomSql "select sum(qty) from primary" between 10 and 20',
    'CustomSql "select order_id from primary where qty > 0"',
]


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ('IsComplete "order_id"', IsComplete("order_id")),
        ('IsUnique "order_id"', IsUnique("order_id")),
        (
            'ColumnValues "country" in [ "US", "CA", NULL ]',
            ColumnValues("country", Condition("in", ("US", "CA", None))),
        ),
        ('ColumnValues "qty" in [1, 2, 3]', ColumnValues("qty", Condition("in", (D(1), D(2), D(3))))),
        ('ColumnValues "qty" between 1 and 2000', ColumnValues("qty", Condition("between", (D(1), D(2000))))),
        ('ColumnValues "qty" not between -1 and 2.5', ColumnValues("qty", Condition("not between", (D(-1), D("2.5"))))),
        ('ColumnValues "qty" > 0', ColumnValues("qty", Condition(">", (D(0),)))),
        ('ColumnValues "qty" <= 0', ColumnValues("qty", Condition("<=", (D(0),)))),
        ('ColumnValues "c" = "x"', ColumnValues("c", Condition("=", ("x",)))),
        ('ColumnValues "c" not in ["a", "b"]', ColumnValues("c", Condition("not in", ("a", "b")))),
        (
            'ColumnValues "c" in ["a"] with threshold >= 0.95',
            ColumnValues("c", Condition("in", ("a",)), Condition(">=", (D("0.95"),))),
        ),
        ("RowCount > 0", RowCount(Condition(">", (D(0),)))),
        ("RowCount between 10 and 100", RowCount(Condition("between", (D(10), D(100))))),
        ("RowCount = 5", RowCount(Condition("=", (D(5),)))),
        ("RowCount != 5", RowCount(Condition("!=", (D(5),)))),
        ("RowCount in [1, 2]", RowCount(Condition("in", (D(1), D(2))))),
        ('RowCountMatch "reference" >= 0.9', RowCountMatch("reference", Condition(">=", (D("0.9"),)))),
        ("ColumnCount = 4", ColumnCount(Condition("=", (D(4),)))),
        ("ColumnCount between 3 and 5", ColumnCount(Condition("between", (D(3), D(5))))),
        (
            'CustomSql "select count(*) from primary" between 10 and 20',
            CustomSql("select count(*) from primary", Condition("between", (D(10), D(20)))),
        ),
        ('CustomSql "select name from primary where age > 18"', CustomSql("select name from primary where age > 18")),
        (
            r"""CustomSql "select count(*) from primary where \"name\" = 'a' and b like 'x\_%'" = 0""",
            CustomSql(
                """select count(*) from primary where "name" = 'a' and b like 'x\\_%'""", Condition("=", (D(0),))
            ),
        ),
    ],
)
def test_dqdl_rules_read_as_glue_spells_them(text: str, rule: object) -> None:
    assert parse_rule(text) == rule


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("IsComplete order_id", "expected a column name in double quotes"),
        ('IsComplete "Order-Id"', "column 'Order-Id' is not a valid name"),
        ('Iscomplete "order_id"', "unknown or unsupported rule type 'Iscomplete'"),
        ('Completeness "order_id" > 0.9', "unknown or unsupported rule type 'Completeness'"),
        ("RowCount", "expected a condition (e.g. > 0) at the end"),
        ("RowCount > ten", "expected a number, got 'ten'"),
        ('RowCount > "10"', "expected a number, got '\"10\"'"),
        ("RowCount between 1 or 2", "expected 'and' in 'between a and b'"),
        ("RowCount > 0 extra", "unexpected 'extra' after the rule"),
        ('RowCount between 1 and 50 where "id < 10"', "'where' clauses are not supported"),
        ("RowCount > avg(last(10))", "expected a number, got 'avg'"),
        ('(IsComplete "a") and (IsComplete "b")', "composite rules (and/or) are not supported"),
        ('ColumnValues "c" matches "[a-z]*"', "'matches' is not supported"),
        ('ColumnValues "c" in ["a", 1]', "all be numbers or all be strings"),
        ('ColumnValues "c" > "a"', "expected a number, got '\"a\"'"),
        ('ColumnValues "c" in ["a" "b"]', "expected ',' or ']' in the list"),
        ('ColumnValues "d" > (now() - 3 days)', "dates, now(), dynamic rules"),
        ('CustomSql "select count(*) from other" > 0', "may read only primary (the new version), not other"),
        ('CustomSql "select count(*) from db.primary" > 0', "may read only primary"),
        ('CustomSql "select count(*) from primary join other on true" > 0', "may read only primary"),
        (
            """CustomSql "select count(*) from primary where reflect('java.lang.System', 'exit', 1) is null" = 0""",
            "may not call reflect: it runs code on the engine",
        ),
        ("""CustomSql "select java_method('a', 'b') from primary" """, "may not call java_method"),
        ('CustomSql "delete from primary" = 0', "must be a SELECT, not DELETE"),
        ('CustomSql "insert into t select * from primary" = 0', "must be a SELECT, not INSERT"),
        ('CustomSql "select 1 from primary; select 2 from primary" = 1', "must be one statement, not 2"),
        ('CustomSql "with x as (select * from primary) select count(*) from x" = 0', "may not use WITH"),
        ('CustomSql "select * from primary" > 0', "must select a single value"),
        ('CustomSql "select count(*) from primary group by a"', "without a condition, CustomSql must be select"),
        ('CustomSql "select count(*) from (select * from primary) s where a > 1"', "without a condition"),
        ('CustomSql "select from where" > 0', "the SQL does not parse"),
        ('CustomSql "select count(*)" = 1', "the SQL must read primary"),
        ("", "a rule must be DQDL text"),
    ],
)
def test_an_invalid_rule_is_refused_naming_it_and_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(QualityRuleError) as caught:
        parse_rule(text)
    message = str(caught.value)
    assert message.startswith(f"rule {text.strip()!r}: "), message
    assert problem in message, message
    assert isinstance(caught.value, InvalidInputError)


def test_checks_are_declared_as_rule_and_severity_and_every_problem_is_named() -> None:
    checks = parse_checks(
        [{"rule": 'IsComplete "order_id"', "severity": "block"}, {"rule": "RowCount > 0", "severity": "warn"}]
    )
    assert [(c.parsed, c.severity) for c in checks] == [
        (IsComplete("order_id"), "block"),
        (RowCount(Condition(">", (D(0),))), "warn"),
    ]
    assert parse_checks([{"rule": "RowCount > 0"}])[0].severity == "block"  # the default stops bad data

    with pytest.raises(QualityRuleError) as caught:
        parse_checks(
            [
                {"rule": 'IsComplete "order_id"'},
                {"rule": "RowCount >", "severity": "block"},
                {"rule": "RowCount > 0", "severity": "fatal"},
                {"rule": "RowCount > 1", "level": "warn"},
            ],
            "tables.shop.orders.checks",
        )
    message = str(caught.value)
    assert "tables.shop.orders.checks[1].rule: rule 'RowCount >': expected a value at the end" in message
    assert "tables.shop.orders.checks[2].severity: Input should be 'block' or 'warn'" in message
    assert "tables.shop.orders.checks[3].level: unknown field" in message
    assert "checks[0]" not in message

    with pytest.raises(QualityRuleError, match="rule 'RowCount > 0' is listed twice"):
        parse_checks([{"rule": "RowCount > 0"}, {"rule": " RowCount > 0 "}])


def _parses_back(sql: str, dialect: str) -> exp.Expression:
    statement = sqlglot.parse_one(sql, read=dialect)
    assert isinstance(statement, exp.Query)
    return statement


@pytest.mark.parametrize("text", EVERY_KIND)
def test_every_rule_compiles_to_sql_that_trino_and_spark_read_back(text: str) -> None:
    compiled = compile_rule(parse_rule(text), VERSION, PUBLISHED)
    for dialect, reader in (("athena", "trino"), ("athena", "athena"), ("spark", "spark")):
        for sql in (compiled.metric_sql(dialect), compiled.sample_sql(dialect)):  # type: ignore[arg-type]
            if sql is None:
                continue
            statement = _parses_back(sql, reader)
            tables = {(t.db, t.name) for t in statement.find_all(exp.Table)}
            assert tables <= {("shop", "orders"), ("shop", "orders_published")}, tables
            assert ("shop", "orders") in tables
            assert "'2026-11-29'" in sql  # every read is of the one partition
    assert (compiled.sample is not None) == (text.startswith(("Is", "ColumnValues")) or text.endswith('0"'))


def test_compiled_sql_reads_only_the_version_and_its_partition() -> None:
    sql = compile_rule(
        parse_rule('CustomSql "select count(*) from primary p where p.qty < 0" = 0'), VERSION
    ).metric_sql()
    assert sql == (
        "SELECT metric, CASE WHEN metric = 0 THEN 1 ELSE 0 END AS passed FROM (SELECT COUNT(*) AS metric FROM "
        '(SELECT * FROM "shop"."orders" WHERE "dt" = \'2026-11-29\') AS "p" WHERE p.qty < 0) AS custom'
    )


def test_quotes_and_backslashes_in_values_stay_inside_their_literals() -> None:
    rule = parse_rule(r"""ColumnValues "c" in ["it's", "a\\b", "say \"hi\""]""")
    assert rule == ColumnValues("c", Condition("in", ("it's", "a\\b", 'say "hi"')))
    compiled = compile_rule(rule, VERSION)
    for dialect in ("athena", "spark"):
        statement = _parses_back(compiled.metric_sql(dialect), "trino" if dialect == "athena" else "spark")  # type: ignore[arg-type]
        values = sorted(literal.this for literal in statement.find_all(exp.Literal) if literal.is_string)
        assert values == sorted(["2026-11-29", "it's", "a\\b", 'say "hi"']), dialect


def test_rowcountmatch_needs_the_reference_and_the_table_reference_checks_its_names() -> None:
    with pytest.raises(ValueError, match="needs the reference"):
        compile_rule(parse_rule('RowCountMatch "reference" >= 0.9'), VERSION)
    with pytest.raises(InvalidInputError, match="not a valid name"):
        TableRef.of("shop", "orders; drop table x")
    with pytest.raises(InvalidInputError, match="not allowed"):
        TableRef.of("shop", "orders", {"dt": "x' or '1'='1"})


def test_the_largest_rules_allowed_stay_under_athenas_statement_limit() -> None:
    """The bounds on a list (MAX_IN_VALUES values of MAX_VALUE_BYTES, each all quotes, which escaping doubles)
    and on CustomSql text keep every compiled statement under Athena's 262,144 bytes; one value more is refused."""
    value = "'" * MAX_VALUE_BYTES
    values = ", ".join(f'"{value}"' for _ in range(MAX_IN_VALUES))
    compiled = compile_rule(parse_rule(f'ColumnValues "c" not in [{values}]'), VERSION)
    for dialect in ("athena", "spark"):
        for sql in (compiled.metric_sql(dialect), compiled.sample_sql(dialect)):  # type: ignore[arg-type]
            assert sql is not None
            assert 200_000 < len(sql.encode()) < ATHENA_STATEMENT_LIMIT
    with pytest.raises(QualityRuleError, match=f"more than the {MAX_IN_VALUES} allowed"):
        parse_rule(f'ColumnValues "c" in [{values}, "x"]')
    with pytest.raises(QualityRuleError, match=f"longer than {MAX_VALUE_BYTES} bytes"):
        parse_rule(f'ColumnValues "c" in ["{"é" * 51}"]')

    padding = " " * (MAX_CUSTOM_SQL_BYTES - 60)
    sql = f"select count(*) from primary where qty < 0{padding}"
    compiled = compile_rule(parse_rule(f'CustomSql "{sql}" = 0'), VERSION)
    assert len(compiled.metric_sql().encode()) < ATHENA_STATEMENT_LIMIT
    with pytest.raises(QualityRuleError, match=f"longer than {MAX_CUSTOM_SQL_BYTES} bytes"):
        parse_rule(f'CustomSql "{sql}{" " * 100}" = 0')


@pytest.mark.parametrize(
    ("condition", "true", "false"),
    [
        (Condition("between", (D(1), D(3))), [2, 2.9], [1, 3, 0]),  # DQDL's between excludes its ends
        (Condition("not between", (D(1), D(3))), [1, 3, 4], [2]),
        (Condition(">=", (D("0.9"),)), [0.9, 1], [0.89]),
        (Condition("in", (D(1), D(4))), [1, 4], [2]),
        (Condition("!=", (D(4),)), [3], [4]),
    ],
)
def test_a_condition_holds_as_dqdl_decides(condition: Condition, true: list[float], false: list[float]) -> None:
    assert [condition.holds(v) for v in true] == [True] * len(true)
    assert [condition.holds(v) for v in false] == [False] * len(false)
