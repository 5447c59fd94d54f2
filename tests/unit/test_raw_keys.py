from __future__ import annotations

import pytest

from stage_a.keys import InvalidKey, decode_notification_key, parse_raw_key


def test_partitioned_key_is_split_into_its_parts() -> None:
    raw = parse_raw_key("engineering/mysql/customers/date=20220120/file_name.csv")
    assert (raw.team, raw.dataset, raw.table) == ("engineering", "mysql", "customers")
    assert raw.partition_spec == {"date": "20220120"}
    assert raw.file_name == "file_name.csv"
    assert raw.partition_prefix == "engineering/mysql/customers/date=20220120/"


def test_multi_level_partitions_keep_their_order() -> None:
    raw = parse_raw_key("eng/sales/orders/year=2022/month=01/day=20/part-0.parquet")
    assert raw.partition == (("year", "2022"), ("month", "01"), ("day", "20"))


def test_unpartitioned_key() -> None:
    raw = parse_raw_key("engineering/mysql/countries/countries.json")
    assert raw.partition == ()
    assert raw.table_prefix == "engineering/mysql/countries/"


def test_partition_values_may_hold_dates_and_times() -> None:
    raw = parse_raw_key("eng/app/events/dt=2022-01-20/hour=10:00/e.json")
    assert raw.partition_spec == {"dt": "2022-01-20", "hour": "10:00"}


HOSTILE_KEYS = {
    "": "empty",
    "engineering/mysql/customers": "too few segments",
    "engineering/mysql/file.csv": "too few segments",
    "/engineering/mysql/customers/f.csv": "leading slash",
    "engineering//customers/f.csv": "empty segment",
    "Engineering/mysql/customers/f.csv": "uppercase team",
    "engineering/my-sql/customers/f.csv": "dash in dataset",
    "engineering/mysql/cust omers/f.csv": "space in table",
    "engineering/mysql/1customers/f.csv": "table starting with a digit",
    "engineering/mysql/customers/date/f.csv": "partition segment without '='",
    "engineering/mysql/customers/=20220120/f.csv": "empty partition column",
    "engineering/mysql/customers/date=/f.csv": "empty partition value",
    "engineering/mysql/customers/date=2022'; DROP TABLE x; --/f.csv": "quote and semicolon",
    "engineering/mysql/customers/date=2022%27/f.csv": "url-encoded quote",
    "engineering/mysql/customers/date=%2e%2e/f.csv": "url-encoded dots",
    "engineering/mysql/customers/date=../f.csv": "dot-dot value",
    "engineering/mysql/customers/date=a..b/f.csv": "dot-dot inside value",
    "engineering/mysql/customers/../f.csv": "dot-dot segment",
    "engineering/mysql/customers/date=1/date=2/f.csv": "duplicate partition column",
    "engineering/mysql/customers/date=20220120/_SUCCESS": "marker file",
    "engineering/mysql/customers/date=20220120/.hidden": "hidden file",
    "engineering/mysql/customers/date=20220120/f'.csv": "quote in file name",
    "engineering/mysql/customers/date=20220120/f;.csv": "semicolon in file name",
    "engineering/mysql/customers/date=caf\u00e9/f.csv": "non-ascii value",
    "engineering/mysql/customers/date=2022\n01/f.csv": "newline",
    "engineering/mysql/customers/date=2022\\01/f.csv": "backslash",
    "engineering/mysql/customers/date=x`y/f.csv": "backtick",
    'engineering/mysql/customers/date=x"y/f.csv': "double quote",
    "engineering/mysql/customers/date=x y/f.csv": "space in value",
    "engineering/mysql/customers/date=20220120/": "no file name",
    "a" * 129 + "/mysql/customers/f.csv": "over-long team",
    "engineering/mysql/customers/" + "k=v/" * 9 + "f.csv": "too deep",
    "engineering/mysql/customers/" + "x" * 1100: "over-long key",
}


@pytest.mark.parametrize("key", list(HOSTILE_KEYS), ids=list(HOSTILE_KEYS.values()))
def test_hostile_keys_are_rejected_with_a_reason(key: str) -> None:
    with pytest.raises(InvalidKey) as error:
        parse_raw_key(key)
    assert "rejected:" in str(error.value)
    assert error.value.problem


def test_notification_keys_are_decoded_exactly_once() -> None:
    assert decode_notification_key("eng/ds/t/date=2022-01-20/my+file.csv") == "eng/ds/t/date=2022-01-20/my file.csv"
    doubly_encoded = decode_notification_key("eng/ds/t/date=x%2527/f.csv")
    assert doubly_encoded == "eng/ds/t/date=x%27/f.csv"
    with pytest.raises(InvalidKey):
        parse_raw_key(doubly_encoded)


def test_an_arrival_copied_with_another_key_parses_its_own_key() -> None:
    """The parsed key is cached on the arrival (parsed once, whoever asks): a copy with another key must not
    keep the original's."""
    from datetime import UTC, datetime

    from stage_a.arrivals import Arrival

    arrival = Arrival(bucket="raw", key="eng/ds/first/date=20220101/f.csv", event_time=datetime.now(UTC))
    assert arrival.raw.table == "first"
    copied = arrival.model_copy(update={"key": "eng/ds/second/date=20220101/f.csv"})
    assert (copied.raw.table, arrival.raw.table) == ("second", "first")
