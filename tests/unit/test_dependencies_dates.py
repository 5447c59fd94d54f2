"""relativedelta attributes and date masks: dateutil semantics, one sign convention, strict inputs."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakeline.dependencies.dates import (
    RelativeDeltaAttributes,
    check_mask,
    check_partition_mask,
    check_substitution_format,
    format_partition_date,
    parse_date,
    parse_weekday,
    shift,
)
from lakeline.errors import InvalidInputError


def shifted(start: str, **attributes: Any) -> str:
    moment = datetime.strptime(start, "%Y%m%d")
    return shift(moment, RelativeDeltaAttributes.model_validate(attributes), "test").strftime("%Y%m%d")


def test_seed_example_follows_dateutil_not_the_seed_typo() -> None:
    # 2022-01-20 is a Thursday; the Saturday on or before it is the 15th (the seed says 16th, a Sunday).
    assert shifted("20220120", weekday="SA(-1)") == "20220115"
    assert shifted("20220115", days=-1) == "20220114"
    assert shifted("20220115", days=-5) == "20220110"


@pytest.mark.parametrize(
    ("day", "weekday", "expected"),
    [
        ("20220115", "SA(-1)", "20220115"),  # already a Saturday: it is its own last Saturday
        ("20220116", "SA(-1)", "20220115"),
        ("20220120", "SA(-2)", "20220108"),
        ("20220120", "SA", "20220122"),  # no occurrence: the next such day, or the day itself
        ("20220120", "SA(+1)", "20220122"),
        ("20220120", "MO", "20220124"),
        ("20220120", "TH", "20220120"),
        ("20220120", "FR(+2)", "20220128"),
        ("20220101", "SU(-1)", "20211226"),  # across a year boundary
    ],
)
def test_weekday_offsets(day: str, weekday: str, expected: str) -> None:
    assert shifted(day, weekday=weekday) == expected


@pytest.mark.parametrize(
    ("day", "attributes", "expected"),
    [
        ("20220131", {"months": 1}, "20220228"),
        ("20240131", {"months": 1}, "20240229"),
        ("20220331", {"months": -1}, "20220228"),
        ("20220315", {"day": 31}, "20220331"),
        ("20220415", {"day": 31}, "20220430"),  # absolute day beyond the month's end: its last day
        ("20220315", {"month": 2, "day": 31}, "20220228"),
        ("20240315", {"month": 2, "day": 31}, "20240229"),
        ("20220115", {"day": 1, "months": 1, "days": -1}, "20220131"),  # last day of the month
        ("20240229", {"years": 1}, "20250228"),
        ("20240229", {"years": 4}, "20280229"),
        ("20240229", {"years": -1}, "20230228"),
        ("20240301", {"days": -1}, "20240229"),
        ("20230301", {"days": -1}, "20230228"),
        ("20240315", {"yearday": 60}, "20240229"),
        ("20240315", {"nlyearday": 60}, "20240301"),
        ("20240115", {"year": 2024, "month": 3, "leapdays": -1}, "20240314"),
        ("20220120", {"weeks": -2, "days": 1}, "20220107"),
        ("20220120", {"year": 2020}, "20200120"),
        ("20220120", {}, "20220120"),
    ],
)
def test_month_ends_leap_days_and_absolute_keys(day: str, attributes: dict[str, Any], expected: str) -> None:
    assert shifted(day, **attributes) == expected


def test_dynamodb_decimals_and_whole_floats_are_numbers() -> None:
    attributes = RelativeDeltaAttributes.model_validate({"days": Decimal("-5"), "months": Decimal("2.0"), "hours": 3.0})
    assert attributes.to_item() == {"months": 2, "days": -5, "hours": 3}
    assert all(type(value) is int for value in attributes.to_item().values())


def test_weekday_is_stored_in_one_spelling() -> None:
    assert RelativeDeltaAttributes(weekday="SA(1)").weekday == "SA(+1)"
    assert RelativeDeltaAttributes(weekday="SA(-1)").weekday == "SA(-1)"
    assert RelativeDeltaAttributes(weekday="MO").weekday == "MO"
    assert repr(parse_weekday("FR(+2)")) == "FR(+2)"


@pytest.mark.parametrize(
    ("attributes", "field", "message"),
    [
        ({"dayz": 1}, "dayz", "Extra inputs"),
        ({"day_of_week": "MO"}, "day_of_week", "Extra inputs"),
        ({"days": 1.5}, "days", "whole number"),
        ({"days": Decimal("-0.5")}, "days", "whole number"),
        ({"days": "5"}, "days", "whole number"),
        ({"days": True}, "days", "not a boolean"),
        ({"days": None}, "days", None),  # explicit null is "not set", accepted below
        ({"months": [1]}, "months", "whole number"),
        ({"years": 5000}, "years", "less than or equal"),
        ({"days": -(10**9)}, "days", "greater than or equal"),
        ({"month": 13}, "month", "less than or equal"),
        ({"month": 0}, "month", "greater than or equal"),
        ({"day": 32}, "day", "less than or equal"),
        ({"hour": 24}, "hour", "less than or equal"),
        ({"yearday": 367}, "yearday", "less than or equal"),
        ({"weekday": "SA(0)"}, "weekday", "must not be 0"),
        ({"weekday": "sa(-1)"}, "weekday", "not a weekday"),
        ({"weekday": "SAT"}, "weekday", "not a weekday"),
        ({"weekday": "SA(-1"}, "weekday", "not a weekday"),
        ({"weekday": "SA(x)"}, "weekday", "not a weekday"),
        ({"weekday": "SA(-1) "}, "weekday", "not a weekday"),
        ({"weekday": 5}, "weekday", "must be a string"),
        ({"weekday": Decimal(5)}, "weekday", "must be a string"),
    ],
)
def test_invalid_attributes_are_errors_naming_the_key(
    attributes: dict[str, Any], field: str, message: str | None
) -> None:
    if message is None:
        assert RelativeDeltaAttributes.model_validate(attributes).to_item() == {}
        return
    with pytest.raises(pydantic.ValidationError) as caught:
        RelativeDeltaAttributes.model_validate(attributes)
    errors = caught.value.errors()
    assert [error["loc"] for error in errors] == [(field,)]
    assert message in errors[0]["msg"]


def test_shift_out_of_range_is_a_validation_error() -> None:
    with pytest.raises(InvalidInputError, match="out of range"):
        shifted("99991231", days=1)


@given(st.dates(min_value=date(1900, 1, 1), max_value=date(2200, 1, 1)), st.integers(-10, -1))
def test_last_weekday_is_on_or_before_and_within_the_weeks(day: date, occurrence: int) -> None:
    moment = datetime(day.year, day.month, day.day)
    result = shift(moment, RelativeDeltaAttributes(weekday=f"SA({occurrence})"), "test")
    assert result.weekday() == 5
    assert timedelta(0) <= moment - result <= timedelta(days=7 * -occurrence - 1)


@given(st.dates(min_value=date(1900, 1, 1), max_value=date(2200, 1, 1)), st.integers(-5000, 5000))
def test_days_add_with_the_sign_as_written(day: date, days: int) -> None:
    moment = datetime(day.year, day.month, day.day)
    assert shift(moment, RelativeDeltaAttributes(days=days), "test") == moment + timedelta(days=days)


def test_masks_are_each_items_own() -> None:
    assert parse_date("2022-01-20", "%Y-%m-%d", "d") == datetime(2022, 1, 20)
    assert parse_date("202201", "%Y%m", "d") == datetime(2022, 1, 1)
    assert format_partition_date(datetime(2022, 1, 15), "%Y-%m-%d", "p") == "2022-01-15"
    with pytest.raises(InvalidInputError, match="does not match the date mask '%Y%m%d'"):
        parse_date("2022-01-20", "%Y%m%d", "customers partition date")


@pytest.mark.parametrize("mask", ["", "Ymd", "%Q", "%Y%", 5, None])
def test_unusable_masks_are_refused(mask: Any) -> None:
    with pytest.raises(ValueError, match=r"directive|cannot parse"):
        check_mask(mask, "DateExpression")


def test_partition_masks_must_give_partition_values() -> None:
    assert check_partition_mask("%Y-%m-%dT%H", "partitionPythonMask") == "%Y-%m-%dT%H"
    with pytest.raises(ValueError, match="not a valid partition value"):
        check_partition_mask("%Y/%m/%d", "partitionPythonMask")
    with pytest.raises(ValueError, match="not a valid partition value"):
        check_partition_mask("%Y %m", "partitionPythonMask")


@pytest.mark.parametrize("mask", ["%Y'%m", "%Y--%m", "%Y\\%m", "%Y;%m", '%Y"%m', "%Y/*%m"])
def test_substitution_formats_cannot_inject_sql(mask: str) -> None:
    with pytest.raises(ValueError, match="may only use"):
        check_substitution_format(mask, "format")


def test_substitution_formats_allow_readable_dates() -> None:
    assert check_substitution_format("%Y/%m/%d %H:%M", "format") == "%Y/%m/%d %H:%M"
    assert check_substitution_format("%d %B %Y", "format") == "%d %B %Y"
