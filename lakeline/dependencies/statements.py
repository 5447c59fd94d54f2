"""What a step's SQL may do: one statement, writing only the item's own dataset or its declared scratch tables.

A step is one statement because stage B runs, rewrites and reports each step as one statement: with two,
the engine runs only what it understands of them, the target is never rewritten into its partition
commit, and the run reports nothing. A step writes only its ``dataset`` (or ``scratchTables`` the item
declares) because each arrival re-runs every step: an ``INSERT`` into another table adds its rows again
on every arrival and a ``DROP`` of another table destroys what the item does not own.

Checked on inline ``sql`` when an item is validated (with sample token values) and on every step,
``sql_file`` ones included, when its SQL is resolved for a run (``lakeline deps resolve`` too).
"""

from __future__ import annotations

from collections.abc import Collection

import sqlglot
from sqlglot.errors import ParseError

from lakeline.errors import InvalidInputError
from lakeline.lineage.columns.writes import written_tables


def step_problem(sql: str, default_database: str, allowed: Collection[str] | None) -> str | None:
    """Why a step's SQL (tokens substituted) is not one statement writing only ``allowed``, or ``None``
    (``allowed=None``: the statement count alone)."""
    try:
        statements = [statement for statement in sqlglot.parse(sql, read="athena") if statement is not None]
    except ParseError as error:
        where = error.errors[0] if error.errors else {}
        found = f" near {where['highlight']!r}" if where.get("highlight") else ""
        place = f"line {where.get('line')}, column {where.get('col')}"
        return f"SQL does not parse: {where.get('description', error)} at {place}{found}"
    if len(statements) != 1:
        return f"a step holds exactly one statement, found {len(statements)}"
    if allowed is None:
        return None
    try:
        written = written_tables(statements[0], default_database=default_database, sql=sql)
    except InvalidInputError as error:
        return str(error)
    others = sorted({f"{database}.{table}" for database, table in written} - set(allowed))
    if others:
        return (
            f"writes {', '.join(others)}; a step may write only {' or '.join(sorted(allowed))} "
            "(declare scratch tables in scratchTables)"
        )
    return None
