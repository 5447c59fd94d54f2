"""The raw object key contract: ``<team>/<dataset>/<table>/[<col>=<value>/...]<file>``.

Keys are checked strictly before anything else happens; a rejected key produces no SQL. Keys from S3
event notifications are URL-encoded; they are decoded exactly once by ``decode_notification_key``, and
a '%' left after that (double encoding) is rejected like any other unsafe character.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote_plus

from lakeline.errors import InvalidInputError
from lakeline.names import check_identifier, check_partition_value

MAX_KEY_LENGTH = 1024
MAX_PARTITION_DEPTH = 8
FILE_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-.=+]{0,254}$")


class InvalidKey(InvalidInputError):
    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"raw object key {key!r} rejected: {problem}")
        self.key = key
        self.problem = problem


@dataclass(frozen=True)
class RawObject:
    key: str
    team: str
    dataset: str
    table: str
    partition: tuple[tuple[str, str], ...]
    file_name: str

    @property
    def partition_spec(self) -> dict[str, str]:
        return dict(self.partition)

    @property
    def table_prefix(self) -> str:
        return f"{self.team}/{self.dataset}/{self.table}/"

    @property
    def partition_prefix(self) -> str:
        return self.table_prefix + "".join(f"{col}={value}/" for col, value in self.partition)

    def holds(self, key: str) -> bool:
        """Whether ``key`` is a file of this object's partition (a key the door has parsed before: the runs'
        state names only those)."""
        prefix = self.partition_prefix
        return key.startswith(prefix) and "/" not in key[len(prefix) :]


def decode_notification_key(key: str) -> str:
    """S3 event notifications URL-encode keys (spaces as '+'); decode once, never twice."""
    return unquote_plus(key)


def parse_raw_key(key: str) -> RawObject:
    if not isinstance(key, str) or not key:
        raise InvalidKey(str(key), "the key is empty")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidKey(key[:64] + "...", f"longer than {MAX_KEY_LENGTH} characters")
    if not key.isascii() or not key.isprintable():
        raise InvalidKey(key, "only printable ASCII characters are allowed")
    if key.startswith("/") or "//" in key or "\\" in key:
        raise InvalidKey(key, "empty path segments, a leading '/' and backslashes are not allowed")
    segments = key.split("/")
    if len(segments) < 4:
        raise InvalidKey(key, "expected <team>/<dataset>/<table>/[<col>=<value>/...]<file>")
    team, dataset, table, *partition_segments, file_name = segments
    if len(partition_segments) > MAX_PARTITION_DEPTH:
        raise InvalidKey(key, f"more than {MAX_PARTITION_DEPTH} partition levels")
    try:
        check_identifier(team, "team")
        check_identifier(dataset, "dataset")
        check_identifier(table, "table")
        partition: list[tuple[str, str]] = []
        for segment in partition_segments:
            column, equals, value = segment.partition("=")
            if not equals:
                raise InvalidKey(key, f"path segment {segment!r} is not <column>=<value>")
            check_identifier(column, "partition column")
            check_partition_value(value, f"partition {column!r}")
            if any(column == seen for seen, _ in partition):
                raise InvalidKey(key, f"partition column {column!r} appears twice")
            partition.append((column, value))
    except InvalidKey:
        raise
    except InvalidInputError as error:
        raise InvalidKey(key, str(error)) from error
    if file_name in ("", ".", "..") or not FILE_NAME_PATTERN.fullmatch(file_name):
        raise InvalidKey(
            key,
            f"file name {file_name!r} must start with a letter or digit and use letters, digits, "
            "'_', '-', '.', '=', '+' (markers such as _SUCCESS and hidden files are not data)",
        )
    return RawObject(key, team, dataset, table, tuple(partition), file_name)
