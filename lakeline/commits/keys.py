"""The names the partition-commit protocol keeps things under: a partition's item key, and the entries of
its ``retired`` and ``contributions`` sets."""

from __future__ import annotations

from collections.abc import Iterable

from lakeline.errors import InvalidInputError
from lakeline.storage import table_root_of

COMMIT_PREFIX = "commit#"


def commit_key(table: str, partition_path: str) -> str:
    """The item key of a partition: ``commit#db.table/col=value/...`` (``commit#db.table/`` if unpartitioned)."""
    return f"{COMMIT_PREFIX}{table}/{partition_path.strip('/')}"


def commit_partition(key: str) -> tuple[str, dict[str, str]]:
    """The table and partition ``{column: value}`` of a partition's item key (``commit_key``'s inverse)."""
    table, _, path = key.removeprefix(COMMIT_PREFIX).partition("/")
    folders = [folder.partition("=") for folder in path.split("/") if folder]
    return table, {name: value for name, _, value in folders}


def commit_table_root(key: str, partition_root: str) -> str:
    """The location of the table whose partition ``key`` has its root at ``partition_root``: where the
    partition's run prefixes may be deleted (``ObjectStore.delete_prefix``)."""
    return table_root_of(partition_root, commit_partition(key)[1])


def contribution_entry(key: str, file_name: str) -> str:
    if "|" in key or "/" in file_name or not key or not file_name:
        raise InvalidInputError(f"contribution {key!r} file {file_name!r}: a key without '|' and a bare file name")
    return f"{key}|{file_name}"


def contribution_files(entries: Iterable[str], key: str) -> tuple[str, ...]:
    """The files of contribution ``key`` among ``key|file`` entries (sorted)."""
    return tuple(sorted(entry.partition("|")[2] for entry in entries if entry.partition("|")[0] == key))


def retired_entry(location: str, at: float) -> str:
    return f"{int(at)}|{location}"


def parse_retired(entry: str) -> tuple[float, str]:
    at, _, location = entry.partition("|")
    return float(at), location
