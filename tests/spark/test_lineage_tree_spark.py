"""``lakeline lineage tree --engine spark``: expression chains from Spark's analyzed plan, with exprIds.

The command starts its own embedded Spark (one per process), so it runs here as a separate process.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

CATALOG = Path(__file__).parents[1] / "unit" / "data" / "column_lineage_catalog.json"


def test_tree_from_the_analyzed_plan(tmp_path: Path) -> None:
    sql = tmp_path / "ushas.sql"
    sql.write_text(
        # The Ushas document's example, written into a table.
        "CREATE TABLE mart.t_out AS "
        "select * from (select substr(a+1,0,1) as c, a+3 as d from (select 1 as a, 2 as b));\n"
        # posexplode's position and a struct's leaf field.
        "SELECT p.customer_id, p.info.city, v.pos FROM sales.profiles p"
        " LATERAL VIEW posexplode(p.visits) v AS pos, visit"
    )
    result = subprocess.run(
        [sys.executable, "-m", "lakeline", "lineage", "tree", str(sql), "--catalog", str(CATALOG), "--engine", "spark",
         "--dialect", "spark", "--database", "sales"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    blocks = result.stdout.split("\n\n")
    ids = re.compile(r"#\d+")
    # Ushas prints: c#2 <- Alias(substring(cast((a#0 + 1) as string), 0, 1) AS c#2) <- a#0 <- Alias(1 AS a#0)
    assert [ids.sub("#N", line) for line in blocks[0].splitlines()] == [
        "mart.t_out.c = c#N",
        "+- c#N = substring(cast((a#N + 1) as string), 0, 1) AS c#N",
        "   +- a#N = 1 AS a#N  [literal]",
    ]
    city = next(block for block in blocks if block.startswith("query_2.city"))
    assert "sales.profiles.info.city  DIRECT IDENTITY" in city
    position = next(block for block in blocks if block.startswith("query_2.pos"))
    # The position is computed from the array (DIRECT TRANSFORMATION), as the SQL source says too.
    assert "position in" in position and "sales.profiles.visits  DIRECT TRANSFORMATION" in position


def test_statements_the_plan_walker_cannot_read_are_refused_one_by_one(tmp_path: Path) -> None:
    sql = tmp_path / "mixed.sql"
    sql.write_text(
        "INSERT INTO mart.customer_flags SELECT customer_id, name FROM sales.customers;\n"
        "INSERT INTO mart.customer_flags WITH RECURSIVE r (customer_id, n) AS (SELECT customer_id, 1 FROM"
        " sales.customers UNION ALL SELECT customer_id, n + 1 FROM r WHERE n < 3)"
        " SELECT customer_id, CAST(n AS string) FROM r;\n"
        "MERGE INTO mart.customer_flags t USING sales.customers s ON t.customer_id = s.customer_id"
        " WHEN MATCHED THEN UPDATE SET flag = s.name;\n"
        "INSERT INTO mart.customer_flags SELECT customer_id, upper(name) FROM sales.customers"
    )
    result = subprocess.run(
        [sys.executable, "-m", "lakeline", "lineage", "tree", str(sql), "--catalog", str(CATALOG), "--engine", "spark",
         "--dialect", "spark"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    # The first and the last statement's trees are printed; the two between are refused, each on its line.
    titles = [block.splitlines()[0] for block in result.stdout.split("\n\n")]
    assert [re.sub(r"#\d+", "#N", title) for title in titles] == [
        "mart.customer_flags.customer_id = customer_id#N AS customer_id#N",
        "mart.customer_flags.flag = name#N AS flag#N",
        "mart.customer_flags.customer_id = customer_id#N AS customer_id#N",
        "mart.customer_flags.flag = upper(name)#N AS flag#N",
    ]
    assert "statement 2: plan node UnionLoop is not supported for column lineage" in result.stderr
    assert "statement 3: plan node MergeIntoTable is not supported for column lineage" in result.stderr
