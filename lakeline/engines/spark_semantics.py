"""The SQL semantics a ``SparkEngine`` runs its statements with: the deployed engine's, not PySpark's (#36).

Embedded Spark is PySpark 4, whose defaults differ from the Spark that AWS Glue runs (every Glue version
is Spark 3.x or older) in ways that change results: ANSI mode is on (``CAST('abc' AS INT)`` and ``1/0``
fail instead of giving NULL), an unparsable datetime pattern gives NULL instead of an error, and a CTE
name defined twice is resolved instead of refused. The ``spark`` engine runs with the deployed Glue
job's settings, the local Athena with the settings closest to Athena's Trino (invalid casts, overflows
and division by zero fail), so a statement that passes locally passes where it is deployed.

One SparkSession is shared by every engine of a process (and by the tests), so the settings are applied
around each statement, restored after it, under one lock: two engines with different semantics never
run a statement at the same time with each other's settings.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakeline.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Held while a statement runs with its engine's settings (reentrant: an engine's statement may run
# inside a span that imposes settings on it, ``SparkEngine.imposed``).
SESSION_SETTINGS = threading.RLock()


@dataclass(frozen=True)
class SqlSemantics:
    """What a statement is run as: ``engine`` (for messages) and the Spark SQL settings that make it so."""

    engine: str
    settings: tuple[tuple[str, str], ...]
    integer_division: bool = False
    """``/`` of two integers is an integer (Trino: ``7 / 2`` is 3); Spark's ``/`` always gives a fraction."""


# Spark 3.5's defaults of the settings whose PySpark 4 defaults change results or failures (Spark's
# migration guide, "Upgrading from Spark SQL 3.5 to 4.0").
SPARK_3_SETTINGS = (
    ("spark.sql.ansi.enabled", "false"),
    ("spark.sql.legacy.timeParserPolicy", "EXCEPTION"),
    ("spark.sql.legacy.ctePrecedencePolicy", "EXCEPTION"),
)


def deployed_spark(spark_version: str) -> SqlSemantics:
    """The semantics of the Spark a Glue job runs (``spark_version``, e.g. ``3.5.4`` for Glue 5.0)."""
    try:
        major = int(spark_version.split(".", 1)[0])
    except ValueError as error:
        raise ConfigError(f"Spark version {spark_version!r} is not a version number") from error
    return SqlSemantics(f"Spark {spark_version}", SPARK_3_SETTINGS if major < 4 else ())


DEPLOYED_SPARK = deployed_spark("3.5.4")
"""The Spark of AWS Glue 5.0, the ``glue_version`` a deployment of the spark engine runs by default
(``stacks/config.py``; a test keeps the two in step)."""

ATHENA = SqlSemantics(
    "Athena engine version 3 (Trino)",
    # Trino fails an invalid cast, an overflow and an integer division by zero, as ANSI mode does.
    (("spark.sql.ansi.enabled", "true"),),
    integer_division=True,
)


@contextmanager
def applied(session: SparkSession, semantics: SqlSemantics) -> Iterator[None]:
    """``semantics``' settings on ``session`` while the block runs (under ``SESSION_SETTINGS``), then
    the session's own settings back."""
    with SESSION_SETTINGS:
        changed: list[tuple[str, str | None]] = []
        try:
            for key, value in semantics.settings:
                current = session.conf.get(key, None)
                if current != value:
                    changed.append((key, current))
                    session.conf.set(key, value)
            yield
        finally:
            for key, before in reversed(changed):
                if before is None:
                    session.conf.unset(key)
                else:
                    session.conf.set(key, before)
