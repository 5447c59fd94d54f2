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
