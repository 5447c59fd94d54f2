"""Hypothesis strategies for hostile input (no tests here): raw object keys, dependency items, lineage
messages. Each mixes well-formed parts with hostile ones, so that both accepted and rejected inputs
are generated and every component gets its turn at being the bad one."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

# Pieces that break out of SQL literals or identifiers, paths, encodings and printable ASCII.
HOSTILE_FRAGMENTS = [
    "'",
    '"',
    "`",
    ";",
    "--",
    "/*",
    "*/",
    "..",
    "%27",
    "%2F",
    "%2e%2e",
    "%",
    "\\",
    " ",
    "\t",
    "\n",
    "\x00",
    "=",
    "+",
    "$",
    "(",
    ")",
    "\u00e9",
    "\u202e",
    "\u200b",
    "\U0001f600",
    "\uff07",  # a fullwidth apostrophe
    "DROP TABLE x",
    "' OR '1'='1",
    "_SUCCESS",
    "a" * 129,
    "1" * 300,
]

identifier = st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True)
partition_value = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_\-.:]{0,16}", fullmatch=True)
file_name = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_\-.=+]{0,20}", fullmatch=True)
hostile_text = st.lists(st.sampled_from(HOSTILE_FRAGMENTS) | partition_value, min_size=1, max_size=4).map("".join)
any_text = st.text(max_size=24)


def component(safe: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Mostly well-formed, sometimes hostile: a key is then accepted often enough to test both sides."""
    return st.one_of(*([safe] * 8), hostile_text, any_text)


@st.composite
def raw_keys(draw: st.DrawFn, *, table_prefix: str | None = None) -> str:
    """``team/dataset/table/[col=value/...]file``, with hostile parts mixed in."""
    if table_prefix is None:
        head = [draw(component(identifier)) for _ in range(3)]
    else:
        head = table_prefix.strip("/").split("/")
    partitions = draw(
        st.lists(
            st.one_of(
                *([st.tuples(component(identifier), component(partition_value)).map("=".join)] * 6),
                component(partition_value),
                st.just(".."),
                st.just(""),
            ),
            max_size=3,
        )
    )
    return "/".join([*head, *partitions, draw(component(file_name))])


# -- JSON values, as they come from files, queues and DynamoDB (numbers as Decimal) -------------------------

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.decimals(allow_nan=True, allow_infinity=True, places=None),
    st.text(max_size=16),
    hostile_text,
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)


def paths_of(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside nested dicts and lists (the root included)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths_of(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += paths_of(child, (*prefix, index))
    return found


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, *rest = path
    copy: Any = dict(value) if isinstance(value, dict) else list(value)
    copy[head] = _replace(value[head], tuple(rest), new)
    return copy


def _delete(value: Any, path: tuple[Any, ...]) -> Any:
    *parent_path, last = path
    parent = value
    for part in parent_path:
        parent = parent[part]
    return _replace(value, tuple(parent_path), _without(parent, last))


def _without(container: Any, key: Any) -> Any:
    if isinstance(container, dict):
        return {k: v for k, v in container.items() if k != key}
    return [v for i, v in enumerate(container) if i != key]


@st.composite
def mutated(draw: st.DrawFn, valid: Any, *, max_mutations: int = 3) -> Any:
    """``valid`` with a few changes: a value replaced (by any JSON value, a hostile string or a number as
    DynamoDB returns it), a field or list entry removed, an unknown field added."""
    value = valid
    for _ in range(draw(st.integers(min_value=1, max_value=max_mutations))):
        paths = paths_of(value)
        path = draw(st.sampled_from(paths))
        operation = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if operation == "delete" and path:
            value = _delete(value, path)
        elif operation == "add" and isinstance(_at(value, path), dict):
            value = _replace(
                value, path, {**_at(value, path), draw(st.text(min_size=1, max_size=8)): draw(json_values)}
            )
        else:
            value = _replace(value, path, draw(json_values))
    return value


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


def to_json_text(value: Any) -> str:
    """JSON text of a generated value (Decimals as numbers; NaN and infinities as JSON allows them)."""

    def default(o: Any) -> Any:
        if isinstance(o, Decimal):
            return float("nan") if o.is_snan() else float(o)
        raise TypeError(type(o).__name__)

    return json.dumps(value, default=default)
