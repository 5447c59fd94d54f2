"""Quality rules (#41) run for real on the shared Spark session, through the Engine protocol (Athena's SQL,
translated by SparkEngine): each rule kind on a partition of good rows and on one of bad rows, with its
metric, its verdict and a sample of the failing rows; the Spark-dialect text gives the same rows. The counted
rules measured together in one statement give what each rule's own statement gives, edge cases included."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from lakeline.engines.base import QueryResult
from lakeline.engines.spark import SparkEngine
from lakeline.engines.spark_semantics import ATHENA
from lakeline.quality import TableRef, compile_rule, evaluate, parse_checks
from lakeline.quality.evaluate import CheckResult, QualityReport
from lakeline.storage import local_root

pytestmark = pytest.mark.spark

DATABASE = "quality_rules"
GOOD = TableRef.of(DATABASE, "orders", {"dt": "good"})
BAD = TableRef.of(DATABASE, "orders", {"dt": "bad"})
EMPTY = TableRef.of(DATABASE, "orders", {"dt": "none"})

ROWS = {
    "good": [
        (1, "FR", 1, "it's"),
        (2, "DE", 2, "a\\b"),
        (3, "FR", 3, "c"),
        (4, "DE", 4, "d"),
    ],
    "bad": [
        (1, "FR", 5, "e"),
        (1, "XX", -1, "f"),
        (None, None, 200, "g"),
    ],
}


@pytest.fixture(scope="module")
def engine(spark_engine: SparkEngine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkEngine]:
    folder = tmp_path_factory.mktemp("quality")
    session = spark_engine.session
    session.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    session.sql(
        f"CREATE TABLE {DATABASE}.orders (order_id BIGINT, country STRING, qty INT, customer STRING, dt STRING) "
        f"USING parquet PARTITIONED BY (dt) LOCATION '{local_root(folder)}'"
    )
    schema = "order_id BIGINT, country STRING, qty INT, customer STRING"
    for dt, rows in ROWS.items():
        session.createDataFrame(rows, schema).createOrReplaceTempView("quality_rows")
        session.sql(f"INSERT INTO {DATABASE}.orders PARTITION (dt = '{dt}') SELECT * FROM quality_rows")
    yield spark_engine
    session.sql(f"DROP TABLE IF EXISTS {DATABASE}.orders")


def _results(engine: SparkEngine, declared: list[dict[str, str]], table: TableRef) -> dict[str, CheckResult]:
    report = evaluate(parse_checks(declared), engine, table, reference=GOOD)
    return {result.rule: result for result in report.results}


RULES = [
    'IsComplete "order_id"',
    'IsUnique "order_id"',
    'ColumnValues "country" in ["FR", "DE"]',
    'ColumnValues "country" in ["FR", "DE", NULL] with threshold >= 0.6',
    'ColumnValues "country" != "XX"',
    'ColumnValues "qty" between 0 and 10',
    'ColumnValues "customer" in ["it\'s", "a\\\\b", "c", "d", "e", "f", "g"]',
    "RowCount >= 3",
    "RowCount > 3",
    'RowCountMatch "reference" >= 0.9',
    "ColumnCount = 4",
    'CustomSql "select count(*) from primary where qty < 0" = 0',
    'CustomSql "select order_id from primary where qty > 0"',
]


def test_every_rule_passes_on_good_rows(engine: SparkEngine) -> None:
    results = _results(engine, [{"rule": rule} for rule in RULES if rule != "RowCount > 3"], GOOD)
    assert {rule: (r.passed, r.metric) for rule, r in results.items()} == {
        'IsComplete "order_id"': (True, 1.0),
        'IsUnique "order_id"': (True, 1.0),
        'ColumnValues "country" in ["FR", "DE"]': (True, 1.0),
        'ColumnValues "country" in ["FR", "DE", NULL] with threshold >= 0.6': (True, 1.0),
        'ColumnValues "country" != "XX"': (True, 1.0),
        'ColumnValues "qty" between 0 and 10': (True, 1.0),
        'ColumnValues "customer" in ["it\'s", "a\\\\b", "c", "d", "e", "f", "g"]': (True, 1.0),
        "RowCount >= 3": (True, 4.0),
        'RowCountMatch "reference" >= 0.9': (True, 1.0),
        "ColumnCount = 4": (True, 4.0),  # the partition column is not counted
        'CustomSql "select count(*) from primary where qty < 0" = 0': (True, 0.0),
        'CustomSql "select order_id from primary where qty > 0"': (True, 1.0),
    }
    assert all(r.sample == () for r in results.values())


def _ids(result: CheckResult) -> list[tuple[str | None, str | None]]:
    return sorted(((row["order_id"], row["qty"]) for row in result.sample), key=str)


def test_each_rule_finds_the_bad_rows_with_its_metric_and_a_sample(engine: SparkEngine) -> None:
    results = _results(engine, [{"rule": rule} for rule in RULES], BAD)
    verdicts = {rule: (r.passed, None if r.metric is None else round(r.metric, 4)) for rule, r in results.items()}
    assert verdicts == {
        'IsComplete "order_id"': (False, 0.6667),
        'IsUnique "order_id"': (False, 0.0),  # 1 twice, and a NULL
        'ColumnValues "country" in ["FR", "DE"]': (False, 0.3333),  # XX and NULL fail
        'ColumnValues "country" in ["FR", "DE", NULL] with threshold >= 0.6': (True, 0.6667),
        'ColumnValues "country" != "XX"': (False, 0.6667),  # a NULL passes !=, as in DQDL
        'ColumnValues "qty" between 0 and 10': (False, 0.3333),
        'ColumnValues "customer" in ["it\'s", "a\\\\b", "c", "d", "e", "f", "g"]': (True, 1.0),
        "RowCount >= 3": (True, 3.0),
        "RowCount > 3": (False, 3.0),
        'RowCountMatch "reference" >= 0.9': (False, 0.75),  # 3 rows against the published 4
        "ColumnCount = 4": (True, 4.0),
        'CustomSql "select count(*) from primary where qty < 0" = 0': (False, 1.0),
        'CustomSql "select order_id from primary where qty > 0"': (False, 0.6667),
    }
    assert _ids(results['IsComplete "order_id"']) == [(None, "200")]
    assert _ids(results['IsUnique "order_id"']) == [("1", "-1"), ("1", "5"), (None, "200")]
    assert _ids(results['ColumnValues "country" in ["FR", "DE"]']) == [("1", "-1"), (None, "200")]
    assert _ids(results['ColumnValues "country" != "XX"']) == [("1", "-1")]
    assert _ids(results['ColumnValues "qty" between 0 and 10']) == [("1", "-1"), (None, "200")]
    assert _ids(results['CustomSql "select order_id from primary where qty > 0"']) == [("1", "-1")]
    sample = results['IsComplete "order_id"'].sample[0]
    assert sample == {"order_id": None, "country": None, "qty": "200", "customer": "g", "dt": "bad"}
    # Rules that judge the whole version have no rows to show.
    assert results["RowCount > 3"].sample == results['RowCountMatch "reference" >= 0.9'].sample == ()


def test_the_sample_is_bounded(engine: SparkEngine) -> None:
    report = evaluate(parse_checks([{"rule": 'IsUnique "order_id"'}]), engine, BAD, sample_rows=2)
    assert len(report.results[0].sample) == 2


def test_a_failed_block_rule_blocks_and_a_failed_warn_rule_does_not(engine: SparkEngine) -> None:
    warn = [{"rule": "RowCount > 3", "severity": "warn"}, {"rule": 'IsComplete "order_id"', "severity": "warn"}]
    report = evaluate(parse_checks(warn), engine, BAD)
    assert [r.passed for r in report.results] == [False, False]
    assert not report.blocked
    report = evaluate(parse_checks([*warn, {"rule": 'IsUnique "order_id"', "severity": "block"}]), engine, BAD)
    assert report.blocked
    assert [r.rule for r in report.failed] == ["RowCount > 3", 'IsComplete "order_id"', 'IsUnique "order_id"']
    assert not evaluate(parse_checks([{"rule": "RowCount >= 3"}]), engine, BAD).blocked


def test_an_empty_version_fails_rowcount_only_and_a_first_version_has_nothing_to_match(engine: SparkEngine) -> None:
    declared = [{"rule": rule} for rule in ("RowCount > 0", 'IsComplete "order_id"', 'IsUnique "order_id"')]
    results = evaluate(parse_checks(declared), engine, EMPTY).results
    assert [(r.passed, r.metric) for r in results] == [(False, 0.0), (True, None), (True, None)]

    declared = [{"rule": 'RowCountMatch "reference" >= 0.9'}]
    first = evaluate(parse_checks(declared), engine, BAD, reference=None).results[0]
    assert (first.passed, first.metric, first.note) == (True, None, "no published version to compare with")
    against_empty = evaluate(parse_checks(declared), engine, BAD, reference=EMPTY).results[0]
    assert (against_empty.passed, against_empty.metric) == (True, None)


def test_the_spark_dialect_text_gives_the_engines_rows(engine: SparkEngine) -> None:
    """The Spark SQL written from the same tree, run on the session as it is, agrees with the Athena text
    run through the engine (which translates it): both dialects mean the same check."""
    for check in parse_checks([{"rule": rule} for rule in RULES]):
        compiled = compile_rule(check.parsed, BAD, GOOD)
        through_engine = engine.execute(compiled.metric_sql("athena"), database=DATABASE)
        direct = engine.session.sql(compiled.metric_sql("spark"))
        assert [tuple(row) for row in direct.collect()] == through_engine.rows, check.rule
        assert direct.columns == through_engine.columns
        if compiled.sample is not None:
            spark_sample, athena_sample = compiled.sample_sql("spark"), compiled.sample_sql("athena")
            assert spark_sample is not None and athena_sample is not None
            direct_rows = [tuple(row) for row in engine.session.sql(spark_sample).collect()]
            engine_rows = engine.execute(athena_sample, database=DATABASE).rows
            assert sorted(direct_rows, key=str) == sorted(engine_rows, key=str), check.rule


def test_a_custom_sql_returning_no_single_value_fails_with_a_note(engine: SparkEngine) -> None:
    declared = [{"rule": 'CustomSql "select qty from primary" > 0'}]
    result = evaluate(parse_checks(declared), engine, BAD).results[0]
    assert (result.passed, result.metric) == (False, None)
    assert result.note == "the query returned 3 rows; it must return one value"


def test_between_excludes_both_ends_as_in_dqdl(engine: SparkEngine) -> None:
    declared = [{"rule": 'ColumnValues "qty" between 1 and 4'}, {"rule": "RowCount between 3 and 4"}]
    results = evaluate(parse_checks(declared), engine, GOOD).results  # qty 1, 2, 3, 4; 4 rows
    assert [(r.passed, r.metric) for r in results] == [(False, 0.5), (False, 4.0)]
    assert _ids(results[0]) == [("1", "1"), ("4", "4")]


def test_the_checks_mean_the_same_under_athenas_semantics(engine: SparkEngine) -> None:
    """Run as the local Athena runs a query (ANSI failures, Trino's integer division), every rule gives the
    same verdict, metric and sample as on Glue's Spark."""
    declared = [{"rule": rule} for rule in RULES]
    on_glue = evaluate(parse_checks(declared), engine, BAD, reference=GOOD)
    with engine.imposed(ATHENA):
        on_athena = evaluate(parse_checks(declared), engine, BAD, reference=GOOD)

    def seen(report: QualityReport) -> list[tuple[str, bool, float | None, list[str]]]:
        return [(r.rule, r.passed, r.metric, sorted(map(str, r.sample))) for r in report.results]

    assert seen(on_athena) == seen(on_glue)
    assert on_athena.blocked


EDGES = [
    'IsComplete "country"',
    'ColumnValues "country" = NULL',
    'ColumnValues "country" != NULL',
    'ColumnValues "country" not in ["XX"]',
    'ColumnValues "country" not in ["XX", NULL]',
    'ColumnValues "country" in [NULL]',
    'ColumnValues "country" not in [NULL]',
    'ColumnValues "country" = "FR" with threshold < 0.5',
    'ColumnValues "qty" in [1, 5, NULL]',
    'ColumnValues "qty" not between 0 and 10',
    'ColumnValues "qty" > 0 with threshold between 0.5 and 0.9',
    'ColumnValues "qty" <= 4 with threshold != 0.5',
    'ColumnValues "order_id" not in [1] with threshold >= 0.3',
    "RowCount = 3",
    "RowCount != 0",
    "RowCount in [3, 4]",
    "RowCount not between 1 and 3",
]


@pytest.mark.parametrize("table", [GOOD, BAD, EMPTY], ids=str)
def test_the_fused_rules_give_what_each_rules_own_statement_gives(engine: SparkEngine, table: TableRef) -> None:
    """Every rule kind and edge case (NULLs, ``!=`` and ``not in``, lists naming NULL, thresholds, an empty
    version), as Glue's Spark and as the local Athena run them: the same metric, verdict, sample and note, in
    the same order, whether the counted rules share one statement or each has its own."""
    checks = parse_checks([{"rule": rule} for rule in [*RULES, *EDGES]])
    fused = evaluate(checks, engine, table, reference=GOOD)
    assert fused == evaluate(checks, engine, table, reference=GOOD, fused=False)
    assert [r.rule for r in fused.results] == [c.rule for c in checks]
    assert any(not r.passed for r in fused.results) or table == GOOD
    with engine.imposed(ATHENA):
        assert evaluate(checks, engine, table, reference=GOOD) == fused


@dataclass
class Counting:
    """The engine, counting the statements sent to it."""

    engine: SparkEngine
    sent: list[str] = field(default_factory=list)

    def execute(self, sql: str, *, database: str | None = None) -> QueryResult:
        self.sent.append(sql)
        return self.engine.execute(sql, database=database)


TYPICAL = [  # benchmarks/quality.py's five, on these rows
    'IsComplete "order_id"',
    'IsUnique "order_id"',
    'ColumnValues "country" in ["FR", "DE"]',
    "RowCount > 0",
    'CustomSql "select count(*) from primary where qty < 0" = 0',
]


def test_five_typical_rules_are_three_statements_and_a_sample_for_each_failure(engine: SparkEngine) -> None:
    checks = parse_checks([{"rule": rule} for rule in TYPICAL])
    counting = Counting(engine)
    assert not evaluate(checks, counting, GOOD).failed
    assert len(counting.sent) == 3, "IsComplete, ColumnValues and RowCount in one; IsUnique; CustomSql"
    assert sum("COUNT(*) AS total" in sql for sql in counting.sent) == 1

    counting = Counting(engine)
    report = evaluate(checks, counting, BAD)
    assert [r.rule for r in report.failed] == [*TYPICAL[:3], TYPICAL[4]]
    assert len(counting.sent) == 3 + 3, "and the failing rows of the three row-level rules that failed"
    counting = Counting(engine)
    assert evaluate(checks, counting, BAD, fused=False) == report
    assert len(counting.sent) == 5 + 3, "a statement per rule"


def test_an_error_in_a_fused_statement_names_the_rules_it_was_checking(engine: SparkEngine) -> None:
    checks = parse_checks([{"rule": 'IsComplete "order_id"'}, {"rule": 'ColumnValues "nowhere" > 0'}])
    with pytest.raises(Exception, match="nowhere") as caught:
        evaluate(checks, engine, GOOD)
    assert caught.value.__notes__ == [
        f"while checking rules 'IsComplete \"order_id\"', 'ColumnValues \"nowhere\" > 0' on {GOOD}"
    ]
