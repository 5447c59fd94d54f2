"""Partition dates: dateutil ``relativedelta`` attributes, and each item's own date masks.

One sign convention everywhere: ``result = date + relativedelta(**attributes)``, with dateutil's own
semantics (absolute keys replace, then relative keys add, then ``weekday`` moves to the nth such day,
counting the start day itself). The seed's worked example says 20220120 with ``SA(-1)`` gives
20220116, a Sunday; dateutil gives 20220115, and Lakeline follows dateutil.

Attributes come from JSON files (ints) and DynamoDB (``Decimal``); both are accepted when they are
whole numbers. Unknown keys, fractions, booleans, strings where numbers belong and out-of-range values
are errors naming the key, never silently ignored.

A partition mask is used both ways: a date is formatted into a partition value, and the value is parsed
back into the date the substitutions start from. A mask that formats without parsing back to the same
partition (``%Y%U`` parses to the year's first day, ``%j`` or ``%d`` lose the year) would build the wrong
partition on every arrival, so masks are checked on a range of moments (``SAMPLE_MOMENTS``: several
years with leap days, year ends and every hour of one day) before an item is accepted.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from decimal import Decimal
from functools import lru_cache
from typing import Annotated, Any

import dateutil.relativedelta
from dateutil.relativedelta import FR, MO, SA, SU, TH, TU, WE, relativedelta
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from lakeline.errors import InvalidInputError
from lakeline.names import check_partition_value

RELATIVE_KEYS = (
    "years",
    "months",
    "weeks",
    "days",
    "leapdays",
    "hours",
    "minutes",
    "seconds",
    "microseconds",
)
ABSOLUTE_KEYS = (
    "year",
    "month",
    "day",
    "weekday",
    "yearday",
    "nlyearday",
    "hour",
    "minute",
    "second",
    "microsecond",
)
WEEKDAYS: dict[str, dateutil.relativedelta.weekday] = {
    "MO": MO,
    "TU": TU,
    "WE": WE,
    "TH": TH,
    "FR": FR,
    "SA": SA,
    "SU": SU,
}
WEEKDAY_PATTERN = re.compile(r"^(MO|TU|WE|TH|FR|SA|SU)(?:\(([+-]?\d{1,3})\))?$")

# Relative shifts are bounded to about a century: a dependency maps an arrival to a nearby partition, so
# anything larger is a typo, and near the ends of the calendar it would overflow on some arrival.
_MAX_DAYS = 36_600
# A leap day, in the afternoon, so masks using %d, %j, %H, %I or %p are all exercised when checked.
REFERENCE_MOMENT = datetime(2024, 2, 29, 13, 45, 30)
# What a date substitution may put into SQL: no quotes, no comment or statement separators.
SUBSTITUTION_TEXT = re.compile(r"^[A-Za-z0-9 _\-.:/]{1,128}$")


def _days(first: datetime, last: datetime, step: timedelta) -> list[datetime]:
    moments = []
    while first <= last:
        moments.append(first)
        first += step
    return moments


# Sorted. Every day of 2023-12-20..2025-01-10 (a leap day, two year ends) at a drifting time of day; the
# ends of 1999 and 2099 (2000 is a leap century, 2100 is not); every hour of one day.
SAMPLE_MOMENTS: tuple[datetime, ...] = tuple(
    sorted(
        {
            *_days(datetime(1999, 12, 24, 23, 59, 59), datetime(2000, 1, 8), timedelta(hours=23, minutes=1)),
            *_days(datetime(2023, 12, 20, 0, 30), datetime(2025, 1, 10), timedelta(days=1, hours=5, seconds=7)),
            *_days(datetime(2024, 3, 10, 0, 15), datetime(2024, 3, 10, 23, 59), timedelta(hours=1)),
            *_days(datetime(2099, 12, 24, 12), datetime(2100, 3, 2), timedelta(days=1, hours=1)),
        }
    )
)
# The moments a shift is tried on: the ends of the sampled range and its leap day.
SHIFT_MOMENTS = (SAMPLE_MOMENTS[0], datetime(2024, 2, 29, 13, 45, 30), datetime(2024, 12, 31, 23), SAMPLE_MOMENTS[-1])
# The longest a partition may span: a year (a ``%Y`` mask), leap day included.
_LONGEST_PARTITION = timedelta(days=366)


def _is_substitution_text(text: str) -> bool:
    """Safe inside or outside a SQL string literal: no quote, no comment start."""
    return bool(SUBSTITUTION_TEXT.fullmatch(text)) and "--" not in text


def _whole_number(value: Any) -> int:
    """Accept ints and whole ``Decimal``/float values (DynamoDB numbers); reject everything else."""
    if isinstance(value, bool):
        raise ValueError("must be a whole number, not a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, Decimal):
        if value.is_finite() and value == value.to_integral_value():
            return int(value)
        raise ValueError(f"must be a whole number, got {value}")
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise ValueError(f"must be a whole number, got {value}")
    raise ValueError(f"must be a whole number, got {type(value).__name__} {value!r}")


WholeNumber = Annotated[int, BeforeValidator(_whole_number)]


def _bounded(limit: int) -> Any:
    return Field(default=None, ge=-limit, le=limit)


def parse_weekday(text: str) -> dateutil.relativedelta.weekday:
    """``"SA(-1)"``, ``"MO"``, ``"FR(+2)"`` → the dateutil weekday; anything else is an error."""
    match = WEEKDAY_PATTERN.fullmatch(text) if isinstance(text, str) else None
    if not match:
        raise ValueError(
            f"{text!r} is not a weekday: write MO, TU, WE, TH, FR, SA or SU, optionally with a "
            "non-zero occurrence such as SA(-1) or FR(+2)"
        )
    name, occurrence = match.groups()
    if occurrence is None:
        return WEEKDAYS[name]
    count = int(occurrence)
    if count == 0:
        raise ValueError(f"{text!r}: the occurrence must not be 0 (use {name}(+1) or {name}(-1))")
    return WEEKDAYS[name](count)


class RelativeDeltaAttributes(BaseModel):
    """The keyword arguments of ``dateutil.relativedelta.relativedelta``, validated one by one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    years: WholeNumber | None = _bounded(_MAX_DAYS // 366)
    months: WholeNumber | None = _bounded(_MAX_DAYS // 28)
    weeks: WholeNumber | None = _bounded(_MAX_DAYS // 7)
    days: WholeNumber | None = _bounded(_MAX_DAYS)
    leapdays: WholeNumber | None = _bounded(366)
    hours: WholeNumber | None = _bounded(_MAX_DAYS * 24)
    minutes: WholeNumber | None = _bounded(_MAX_DAYS * 24 * 60)
    seconds: WholeNumber | None = _bounded(_MAX_DAYS * 24 * 3600)
    microseconds: WholeNumber | None = _bounded(_MAX_DAYS * 24 * 3600 * 1_000_000)
    year: WholeNumber | None = Field(default=None, ge=1, le=9999)
    month: WholeNumber | None = Field(default=None, ge=1, le=12)
    day: WholeNumber | None = Field(default=None, ge=1, le=31)
    weekday: str | None = None
    yearday: WholeNumber | None = Field(default=None, ge=1, le=366)
    nlyearday: WholeNumber | None = Field(default=None, ge=1, le=365)
    hour: WholeNumber | None = Field(default=None, ge=0, le=23)
    minute: WholeNumber | None = Field(default=None, ge=0, le=59)
    second: WholeNumber | None = Field(default=None, ge=0, le=59)
    microsecond: WholeNumber | None = Field(default=None, ge=0, le=999_999)

    @field_validator("weekday", mode="before")
    @classmethod
    def _weekday(cls, value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError(f"must be a string such as 'SA(-1)', got {type(value).__name__} {value!r}")
        return repr(parse_weekday(value))  # one spelling: "SA(+1)" for "SA(1)"

    def as_kwargs(self) -> dict[str, Any]:
        """The attributes as relativedelta keyword arguments (weekday as a dateutil weekday)."""
        kwargs: dict[str, Any] = self.model_dump(exclude_none=True)
        if self.weekday is not None:
            kwargs["weekday"] = parse_weekday(self.weekday)
        return kwargs

    def delta(self) -> relativedelta:
        return relativedelta(**self.as_kwargs())

    def times(self, factor: int) -> RelativeDeltaAttributes:
        """These relative attributes ``factor`` times (absolute ones, and weekday, as they are)."""
        values = self.model_dump(exclude_none=True)
        scaled = {key: value * factor if key in RELATIVE_KEYS else value for key, value in values.items()}
        return RelativeDeltaAttributes.model_validate(scaled)

    def to_item(self) -> dict[str, Any]:
        """The attributes as stored in an item: only the keys that are set."""
        return self.model_dump(exclude_none=True)


def shift(moment: datetime, attributes: RelativeDeltaAttributes, what: str) -> datetime:
    """``moment + relativedelta(attributes)``; a result outside years 1..9999 is an error naming ``what``."""
    try:
        return moment + attributes.delta()
    except (OverflowError, ValueError) as error:
        raise InvalidInputError(
            f"{what} {attributes.to_item()} moves {moment:%Y-%m-%d %H:%M:%S} out of range: {error}"
        ) from error


def check_mask(mask: Any, what: str) -> str:
    """A strftime/strptime mask that formats a date and parses its own output back."""
    if not isinstance(mask, str) or "%" not in mask:
        raise ValueError(f"{what} {mask!r} has no strftime directive such as %Y, %m or %d")
    try:
        datetime.strptime(REFERENCE_MOMENT.strftime(mask), mask)
    except ValueError as error:
        raise ValueError(f"{what} {mask!r} cannot parse the dates it formats: {error}") from error
    return mask


@lru_cache(maxsize=256)
def round_trip_problem(mask: str) -> str | None:
    """Why ``mask`` does not round-trip on ``SAMPLE_MOMENTS`` (``None`` if it does).

    For every moment, its value must parse back to a moment with the same value, at or before it and at
    most a year earlier (the start of its partition); and the moments of one value must be consecutive.
    """
    seen: dict[str, datetime] = {}
    previous = ""
    for moment in SAMPLE_MOMENTS:
        value = moment.strftime(mask)
        example = f"{moment:%Y-%m-%d %H:%M:%S} formats to {value!r}"
        try:
            parsed = datetime.strptime(value, mask)
        except ValueError as error:
            return f"{example}, which does not parse back ({error})"
        back = parsed.strftime(mask)
        if back != value or not timedelta(0) <= moment - parsed <= _LONGEST_PARTITION:
            return f"{example}, which parses back to {parsed:%Y-%m-%d %H:%M:%S} ({back!r})"
        if value != previous and value in seen:
            return f"{example}, as does {seen[value]:%Y-%m-%d %H:%M:%S}: one partition would hold dates apart"
        seen.setdefault(value, moment)
        previous = value
    return None


def check_round_trip(mask: Any, what: str) -> str:
    """A mask that parses every partition value it formats back into that partition."""
    checked = check_mask(mask, what)
    problem = round_trip_problem(checked)
    if problem:
        raise ValueError(f"{what} {checked!r} does not round-trip: {problem}")
    return checked


def check_partition_mask(mask: Any, what: str) -> str:
    """A round-trip mask whose output is a valid partition value (no '/', spaces or quotes)."""
    checked = check_mask(mask, what)
    sample = REFERENCE_MOMENT.strftime(checked)
    try:
        check_partition_value(sample, what)
    except InvalidInputError as error:
        raise ValueError(f"{what} {mask!r} produces {sample!r}, not a valid partition value") from error
    return check_round_trip(checked, what)


@lru_cache(maxsize=1024)
def shift_problem(
    start_mask: str, attributes: RelativeDeltaAttributes, result_mask: str, *, partition: bool
) -> str | None:
    """Why dates parsed with ``start_mask``, shifted by ``attributes``, fail on a sampled date (or ``None``):
    an overflow, found here rather than by the first arrival that meets it, or a result ``result_mask``
    cannot write (a partition value that does not parse back, or text that cannot go into SQL)."""
    for moment in SHIFT_MOMENTS:
        start = datetime.strptime(moment.strftime(start_mask), start_mask)
        try:
            result = start + attributes.delta()
        except (OverflowError, ValueError) as error:
            return f"{attributes.to_item()} moves {start:%Y-%m-%d %H:%M:%S} out of range ({error})"
        text = result.strftime(result_mask)
        if partition:
            try:
                check_partition_value(text, "partition value")
                if datetime.strptime(text, result_mask).strftime(result_mask) == text:
                    continue
            except ValueError:  # InvalidInputError included
                pass
        elif _is_substitution_text(text):
            continue
        return (
            f"{attributes.to_item()} moves {start:%Y-%m-%d} to {result:%Y-%m-%d}, which {result_mask!r} writes {text!r}"
        )
    return None


def check_substitution_format(mask: Any, what: str) -> str:
    """A mask whose output can go into SQL text: letters, digits, space and ``_-.:/`` only."""
    checked = check_mask(mask, what)
    sample = REFERENCE_MOMENT.strftime(checked)
    if not _is_substitution_text(sample):
        raise ValueError(
            f"{what} {mask!r} produces {sample!r}; substituted dates may only use letters, digits, "
            "spaces and '_-.:/' (and no '--')"
        )
    return checked


def parse_date(value: str, mask: str, what: str) -> datetime:
    try:
        return datetime.strptime(value, mask)
    except ValueError as error:
        raise InvalidInputError(f"{what} {value!r} does not match the date mask {mask!r}") from error


def format_partition_date(moment: datetime, mask: str, what: str) -> str:
    return check_partition_value(moment.strftime(mask), what)


def format_substitution(moment: datetime, mask: str, what: str) -> str:
    text = moment.strftime(mask)
    if not _is_substitution_text(text):
        raise InvalidInputError(f"{what} formats to {text!r}, which cannot be put into SQL")
    return text
