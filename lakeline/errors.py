"""Errors shared across Lakeline, and the one way pydantic's validation errors are put into words.

Each error says what was wrong in words a user can act on. ``InvalidInputError`` is also a
``ValueError``, so a pydantic validator may raise it (or call a check that does) and pydantic reports
it under the field it was checking; ``validation_problems`` then reads pydantic's error back as one
``field.path: problem`` line per problem, for every edge that validates with pydantic (dependency
items, plans, queue messages, lineage records, a function's environment).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import pydantic

_ModelT = TypeVar("_ModelT", bound=pydantic.BaseModel)


class LakelineError(Exception):
    """Base class of every error Lakeline raises on purpose."""


class InvalidInputError(LakelineError, ValueError):
    """Input (a key, an item, a message, a name) is not acceptable; nothing was executed."""


class ConfigError(LakelineError):
    """Configuration is missing or inconsistent."""


ProblemWording = Callable[[Mapping[str, Any]], "str | None"]
"""Words of one's own for one of pydantic's error details (``None``: the general wording)."""


_TERMINAL_CODES = re.compile(r"\x1b\[[0-9;]*m")


def plain(message: str) -> str:
    """``message`` without terminal escape codes (sqlglot underlines the token it could not parse with
    them): what a log, a pipe or a JSON report shows as garbage."""
    return _TERMINAL_CODES.sub("", message)


def field_path(location: Sequence[int | str]) -> str:
    """``steps[0].sql`` for pydantic's location ``("steps", 0, "sql")``."""
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def validation_problems(
    error: pydantic.ValidationError,
    *,
    wording: ProblemWording | None = None,
    path: Callable[[Sequence[int | str]], str] = field_path,
    whole: str = "(top level)",
) -> list[str]:
    """One ``field.path: problem`` per problem pydantic found, in the words a user acts on.

    A validator's own message (a ``ValueError``, such as ``InvalidInputError``) is given as written; a
    missing or unknown field is said so; anything else is pydantic's message with the value it got.
    A detail whose ``ctx`` carries ``problems`` (already ``field.path: problem`` lines) gives those.
    ``path`` spells a location (an environment names ``STATE_MACHINE_ARN``), ``whole`` the object itself.
    """
    problems: list[str] = []
    for detail in error.errors():
        listed = (detail.get("ctx") or {}).get("problems")
        if isinstance(listed, list):
            problems.extend(str(problem) for problem in listed)
            continue
        message = wording(detail) if wording is not None else None
        if message is None:
            message = _general_wording(detail)
        problems.append(f"{path(tuple(detail['loc'])) or whole}: {message}")
    return problems


def _general_wording(detail: Mapping[str, Any]) -> str:
    kind = detail["type"]
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "value_error":
        return str(detail["msg"]).removeprefix("Value error, ")
    return f"{detail['msg']} (got {detail.get('input')!r})"


def validated(model: type[_ModelT], data: Any, what: str) -> _ModelT:
    """``data`` as a ``model``, else ``InvalidInputError``: ``invalid {what}: field.path: problem; ...``."""
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as error:
        raise InvalidInputError(f"invalid {what}: " + "; ".join(validation_problems(error))) from None
