"""``benchmarks/quality.py`` runs (#41): both tables loaded from the same files at a tiny size, the checked one's
every run through its five rules, none blocked, the same rows in both. Its figures are in docs/measurements.md."""

from __future__ import annotations

import pytest

from benchmarks.quality import CHECKS, TABLES, run
from lakeline.engines.spark import SparkEngine
from lakeline.runtimes.embedded.handler_caches import reset_handler_caches

pytestmark = pytest.mark.spark


def test_the_quality_benchmark_runs_at_a_tiny_size(spark_engine: SparkEngine) -> None:
    reset_handler_caches()
    try:
        measured = run(rows=200, partitions=1, arrivals=2, engine=spark_engine)
    finally:
        reset_handler_caches()
    assert len(CHECKS) == 5
    assert measured.rows == dict.fromkeys(TABLES, 400), "100 rows a file, 2 files, a warm-up partition and one more"
    assert measured.runs == dict.fromkeys(TABLES, 2), "the warm-up's runs not counted"
    assert (measured.reports, measured.blocked) == (4, 0), "every checked run ran its checks, and passed"
    assert all(seconds > 0 for seconds in measured.seconds.values())
