"""Column lineage of UPDATE with FROM, joins and CTEs (#43): sqllineage's UPDATE cases and the issue's three.

The statements are sqllineage's (``tests/sql/column/test_column_update.py``), with its tables and its
expected DIRECT edges; Lakeline also reports the WHERE and ON columns as INDIRECT inputs, stated here too.
Each is read in the dialects Lakeline takes SQL in (Athena, Trino, Spark): sqlglot parses ``UPDATE ...
FROM`` and ``WITH ... UPDATE`` in all three, though the engines themselves run only ``UPDATE t SET ...
WHERE`` (with subqueries in Trino and Athena), which is covered below too.
"""

from __future__ import annotations

import re

import pytest
import sqlglot

from lakeline.engines.base import Column, TableNotFound, TableSchema
from lakeline.errors import InvalidInputError
from lakeline.lineage.columns.model import StatementLineage, TransformationType
from lakeline.lineage.columns.sql import SqlColumnLineage, TableLevel, column_lineage
from lakeline.lineage.columns.writes import written_tables

DIALECTS = ("athena", "trino", "spark")
TABLES = {
    ("public", "tgt_tbl1"): ("id", "name", "email"),
    ("public", "src_tbl1"): ("id", "name", "address"),
    ("public", "src_tbl2"): ("id", "email"),
    ("public", "tab1"): ("id", "c"),
    ("public", "tab2"): ("id", "c"),
    ("public", "t"): ("id", "c"),  # a table named like the T-SQL case's alias: the alias still wins
}


class Catalog:
    def describe_table(self, database: str, table: str) -> TableSchema:
        if (database, table) not in TABLES:
            raise TableNotFound(database, table)
        return TableSchema(database, table, tuple(Column(name, "string") for name in TABLES[(database, table)]))


def _lineage(sql: str, dialect: str) -> StatementLineage:
    (lineage,) = column_lineage(sql, Catalog(), dialect=dialect, default_database="public")
    return lineage


def _direct(lineage: StatementLineage) -> set[tuple[str, str]]:
    """sqllineage's terms: (source column, target column) for each DIRECT edge."""
    return {
        (str(edge.source), f"{lineage.target}.{column.name}")
        for column in lineage.columns
        for edge in column.dependencies
        if edge.transformation.type is TransformationType.DIRECT
    }


def _indirect(lineage: StatementLineage) -> set[str]:
    """Every INDIRECT edge, of the columns and of the dataset, as ``source SUBTYPE``."""
    edges = [edge for column in lineage.columns for edge in column.dependencies] + list(lineage.dataset)
    return {
        f"{edge.source} {edge.transformation.subtype.value}"
        for edge in edges
        if edge.transformation.type is TransformationType.INDIRECT
    }


NAME_AND_ADDRESS = {
    ("public.src_tbl1.name", "public.tgt_tbl1.name"),
    ("public.src_tbl1.address", "public.tgt_tbl1.email"),
}
NAME_AND_EMAIL = {
    ("public.src_tbl1.name", "public.tgt_tbl1.name"),
    ("public.src_tbl2.email", "public.tgt_tbl1.email"),
}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_update_from_one_table(dialect: str) -> None:
    # sqllineage's test_column_update_with_single_table (it passed before #43 too: kept as the reference).
    lineage = _lineage(
        "update public.tgt_tbl1 as t set name = s.name, email = s.address from public.src_tbl1 as s where s.id = t.id",
        dialect,
    )
    assert lineage.target == "public.tgt_tbl1"
    assert _direct(lineage) == NAME_AND_ADDRESS
    assert _indirect(lineage) == {"public.src_tbl1.id FILTER", "public.tgt_tbl1.id FILTER"}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_update_from_a_join(dialect: str) -> None:
    # Issue case 1 (sqllineage's test_column_update_with_multi_tables): was "column s2.email refers to an
    # unknown relation", the FROM's JOIN being dropped from the rewritten query.
    lineage = _lineage(
        """
        update public.tgt_tbl1 as t
        set name = s1.name, email = s2.email
        from public.src_tbl1 as s1 join public.src_tbl2 as s2 on s1.id = s2.id
        where s1.id = t.id
        """,
        dialect,
    )
    assert lineage.inputs == ("public.src_tbl1", "public.src_tbl2", "public.tgt_tbl1")
    assert _direct(lineage) == NAME_AND_EMAIL
    assert _indirect(lineage) == {
        "public.src_tbl1.id JOIN",
        "public.src_tbl2.id JOIN",
        "public.src_tbl1.id FILTER",
        "public.tgt_tbl1.id FILTER",
    }


@pytest.mark.parametrize("dialect", DIALECTS)
def test_update_from_comma_separated_tables(dialect: str) -> None:
    # The second statement of sqllineage's test_column_update_with_multi_tables.
    lineage = _lineage(
        """
        update public.tgt_tbl1 as t
        set name = s1.name, email = s2.email
        from public.src_tbl1 as s1, public.src_tbl2 as s2
        where s1.id = s2.id and s1.id = t.id
        """,
        dialect,
    )
    assert _direct(lineage) == NAME_AND_EMAIL
    assert _indirect(lineage) == {"public.src_tbl1.id FILTER", "public.src_tbl2.id FILTER", "public.tgt_tbl1.id FILTER"}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_update_from_a_subquery(dialect: str) -> None:
    # sqllineage's test_column_update_with_subquery (it passed before #43 too: kept as the reference).
    lineage = _lineage(
        """
        update public.tgt_tbl1 as t
        set name = s.name, email = s.email
        from (
            select s1.id, s1.name, s2.email
            from public.src_tbl1 as s1 join public.src_tbl2 as s2 on s1.id = s2.id
        ) as s
        where s.id = t.id
        """,
        dialect,
    )
    assert _direct(lineage) == NAME_AND_EMAIL


@pytest.mark.parametrize("dialect", DIALECTS)
def test_update_through_a_cte_names_the_cte_tables(dialect: str) -> None:
    # Issue case 2 (sqllineage's test_column_update_with_cte, its CTE given the id its WHERE reads): the
    # sources are src_tbl1's columns, never the CTE s. Was "table public.s is not in the catalog".
    lineage = _lineage(
        """
        with s as (select id, name, address from public.src_tbl1)
        update public.tgt_tbl1 as t
        set name = s.name, email = s.address
        from s
        where s.id = t.id
        """,
        dialect,
    )
    assert lineage.inputs == ("public.src_tbl1", "public.tgt_tbl1")
    assert _direct(lineage) == NAME_AND_ADDRESS
    assert _indirect(lineage) == {"public.src_tbl1.id FILTER", "public.tgt_tbl1.id FILTER"}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_update_through_a_cte_with_a_join(dialect: str) -> None:
    lineage = _lineage(
        """
        with s as (
            select s1.id, s1.name, s2.email
            from public.src_tbl1 s1 join public.src_tbl2 s2 on s1.id = s2.id
        )
        update public.tgt_tbl1 as t set name = s.name, email = s.email from s where s.id = t.id
        """,
        dialect,
    )
    assert _direct(lineage) == NAME_AND_EMAIL
    assert "public.src_tbl2.id JOIN" in _indirect(lineage)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_cte_column_that_does_not_exist_is_refused(dialect: str) -> None:
    # sqllineage's test_column_update_with_cte verbatim: its CTE has no id, which its WHERE reads. An engine
    # refuses the statement; so does Lakeline, rather than guess where s.id comes from.
    sql = """
        with s as (select name, address from public.src_tbl1)
        update public.tgt_tbl1 as t set name = s.name, email = s.address from s where s.id = t.id
    """
    message = "cannot resolve the statement's columns: Unknown column: id"
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        _lineage(sql, dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("alias", ["", "AS "])
def test_tsql_update_of_a_from_alias(dialect: str, alias: str) -> None:
    # Issue case 3 (sqllineage's test_column_update_tsql_alias_target_column, read in Lakeline's dialects: it
    # has no T-SQL one): t is tab1's alias in the FROM, so tab1 is written, even with a table t in the
    # catalog. Was "Alias already used: t".
    lineage = _lineage(f"UPDATE t SET t.c = s.c FROM tab1 {alias}t JOIN tab2 {alias}s ON t.id = s.id", dialect)
    assert lineage.target == "public.tab1"
    assert lineage.inputs == ("public.tab1", "public.tab2")
    assert _direct(lineage) == {("public.tab2.c", "public.tab1.c")}
    assert _indirect(lineage) == {"public.tab1.id JOIN", "public.tab2.id JOIN"}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_tsql_update_of_a_joined_alias(dialect: str) -> None:
    # The target's alias names the joined relation, not the first one of the FROM.
    lineage = _lineage(
        "UPDATE t SET c = UPPER(s.c) FROM tab2 AS s JOIN tab1 AS t ON t.id = s.id WHERE s.c > 'a'", dialect
    )
    assert lineage.target == "public.tab1"
    assert lineage.inputs == ("public.tab1", "public.tab2")
    assert _direct(lineage) == {("public.tab2.c", "public.tab1.c")}
    assert _indirect(lineage) == {"public.tab1.id JOIN", "public.tab2.id JOIN", "public.tab2.c FILTER"}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_tsql_update_of_a_from_table_by_name(dialect: str) -> None:
    lineage = _lineage("UPDATE tab1 SET c = s.c FROM tab1 JOIN tab2 AS s ON tab1.id = s.id", dialect)
    assert lineage.target == "public.tab1"
    assert _direct(lineage) == {("public.tab2.c", "public.tab1.c")}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_step_writing_a_from_alias_writes_its_table(dialect: str) -> None:
    # The stage B check of what a step writes reads the same target as the lineage.
    sql = "WITH s AS (SELECT id, c FROM public.tab2) UPDATE t SET t.c = s.c FROM public.tab1 AS t JOIN s ON t.id = s.id"
    (statement,) = sqlglot.parse(sql, read=dialect)
    assert statement is not None
    assert written_tables(statement, default_database="public", sql=sql) == [("public", "tab1")]
    lineage = _lineage(sql, dialect)
    assert lineage.target == "public.tab1"
    assert _direct(lineage) == {("public.tab2.c", "public.tab1.c")}
    # And the table-level lineage of a step whose column lineage is refused.
    tables = SqlColumnLineage(Catalog(), dialect=dialect, default_database="public").tables(sql)
    assert tables == TableLevel(inputs=("public.tab2",), outputs=("public.tab1",))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_update_with_subqueries_reading_a_cte(dialect: str) -> None:
    # The form the engines run (Trino and Athena take subqueries in SET and WHERE): the CTE's table is
    # the source, its filter column an indirect input.
    lineage = _lineage(
        """
        WITH s AS (SELECT id, email FROM public.src_tbl2 WHERE email IS NOT NULL)
        UPDATE public.tgt_tbl1
        SET email = (SELECT MAX(s.email) FROM s WHERE s.id = tgt_tbl1.id)
        WHERE id IN (SELECT id FROM public.src_tbl1 WHERE name = 'x')
        """,
        dialect,
    )
    assert lineage.inputs == ("public.src_tbl1", "public.src_tbl2", "public.tgt_tbl1")
    assert _direct(lineage) == {("public.src_tbl2.email", "public.tgt_tbl1.email")}
    assert _indirect(lineage) == {
        "public.src_tbl2.email FILTER",
        "public.src_tbl2.id FILTER",
        "public.tgt_tbl1.id FILTER",
        "public.src_tbl1.id FILTER",
        "public.src_tbl1.name FILTER",
    }
