"""Checks as users declare them: a list of ``{"rule": "<one DQDL rule>", "severity": "block" | "warn"}``.

Why this shape: the rule is DQDL text exactly as a Glue Data Quality ruleset holds it, so a rule can be
copied between a Glue ruleset and Lakeline unchanged; the severity, which DQDL has no word for, sits next
to the rule it governs. A whole ``Rules = [ ... ]`` string would need a second list of severities
matched to rules by position. The list reads the same in YAML and JSON::

    checks:
      - rule: 'IsComplete "order_id"'
        severity: block
      - rule: 'RowCountMatch "reference" >= 0.9'
        severity: warn

``severity`` defaults to ``block``: a check is declared to stop bad data. Each rule is parsed when the
list is validated, so an invalid one is refused there, named, before anything runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Annotated, Any

import pydantic
from pydantic import AfterValidator, BaseModel, ConfigDict, field_validator

from lakeline.errors import validation_problems
from lakeline.quality.dqdl import parse_rule
from lakeline.quality.rules import Rule, Severity
from lakeline.quality.sql import QualityRuleError

MAX_CHECKS = 100
MAX_CHECKS_BYTES = 64_000
"""Of one table's rules' text together: the checks travel in its runs' plans (a state machine's input holds at
most 256 KiB), so what one table declares stays bounded whatever its rules are."""


class Check(BaseModel):
    """One rule and what its failure does."""

    model_config = ConfigDict(frozen=True, extra="forbid", ignored_types=(cached_property,))

    rule: str
    severity: Severity = "block"

    @field_validator("rule")
    @classmethod
    def _rule(cls, value: str) -> str:
        parse_rule(value)  # QualityRuleError is a ValueError: pydantic reports it under "rule"
        return value.strip()

    @cached_property
    def parsed(self) -> Rule:
        return parse_rule(self.rule)


def check_list(checks: Sequence[Check]) -> Sequence[Check]:
    """``checks`` if they are few enough, small enough and each rule listed once; else ``ValueError``."""
    if len(checks) > MAX_CHECKS:
        raise ValueError(f"at most {MAX_CHECKS} checks, got {len(checks)}")
    size = sum(len(check.rule.encode()) for check in checks)
    if size > MAX_CHECKS_BYTES:
        raise ValueError(f"the rules hold {size} bytes together, over the {MAX_CHECKS_BYTES} allowed")
    seen: set[str] = set()
    for check in checks:
        if check.rule in seen:
            raise ValueError(f"rule {check.rule!r} is listed twice")
        seen.add(check.rule)
    return checks


Checks = Annotated[tuple[Check, ...], AfterValidator(check_list)]
"""A table's or a target's ``checks`` field: validated as ``parse_checks`` validates a list."""


class _Checks(pydantic.RootModel[Checks]):
    pass


def parse_checks(data: Any, what: str = "checks") -> tuple[Check, ...]:
    """``data`` (a list of ``{"rule", "severity"}``) as checks, else ``QualityRuleError`` listing every
    problem as ``what[i].field: problem``."""
    try:
        return _Checks.model_validate(data).root
    except pydantic.ValidationError as error:
        problems = validation_problems(error, path=lambda location: _path(what, location), whole=what)
        raise QualityRuleError(f"{what} are invalid:\n" + "\n".join(f"  - {p}" for p in problems)) from None


def _path(what: str, location: Any) -> str:
    path = what
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path
