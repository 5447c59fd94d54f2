"""The demo's judgement of its blocked file (#41): it must have been refused by the country rule at its partition,
once, and the day must still hold its previous version; otherwise the demo fails, naming what did not hold."""

from __future__ import annotations

import pytest

from lakeline.errors import LakelineError
from lakeline.runtimes.embedded.demo import (
    BLOCKED_DAY,
    BLOCKED_KEY,
    COUNTRY_RULE,
    CUSTOMERS,
    expected_block,
    still_served,
)

REASON = f"quality checks blocked {CUSTOMERS} (date={BLOCKED_DAY}): rule '{COUNTRY_RULE}' failed (metric 0.99)"
OTHER = "engineering/sales/orders/date=20220120/x.parquet: header lacks column order_id"


def test_the_blocked_file_is_found_and_taken_out_of_what_the_demo_is_judged_by() -> None:
    assert expected_block([OTHER, f"{BLOCKED_KEY}: {REASON}"]) == (f"{BLOCKED_KEY}: {REASON}", [OTHER])
    assert expected_block([f"quality failed: QualityBlocked: {REASON}"])[1] == []


@pytest.mark.parametrize(
    "reasons",
    [
        [],  # not blocked at all: published
        [OTHER],
        [REASON.replace(BLOCKED_DAY, "20220119")],  # another day
        [REASON.replace("ColumnValues", "IsUnique")],  # another rule
        [REASON, REASON],  # blocked twice
    ],
)
def test_the_demo_fails_unless_its_file_was_blocked_once_by_its_rule(reasons: list[str]) -> None:
    with pytest.raises(LakelineError, match="the quality gate did not hold"):
        expected_block(reasons)


def test_the_day_must_still_hold_its_previous_version() -> None:
    day = {"table": CUSTOMERS, "partition": f"date={BLOCKED_DAY}"}
    assert still_served([{**day, "rows": 500}]) == 500
    with pytest.raises(LakelineError, match="something of it was published"):
        still_served([{**day, "rows": 502}])
