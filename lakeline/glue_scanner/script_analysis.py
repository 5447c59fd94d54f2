"""What the analysis of one Glue script is given (``ScriptContext``) and what it finds
(``ScriptAnalysis``, a ``Write`` per sink). Apart so that the layers of the script interpreter and the
job's report (``lineage``, ``events``) share them without importing the interpreter."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from lakeline.engines.base import TableSchema
from lakeline.glue_scanner.catalog import GlueCatalog
from lakeline.glue_scanner.column_exprs import Problem, Site
from lakeline.glue_scanner.frames import merge_problems
from lakeline.glue_scanner.job_modules import ModuleSource
from lakeline.lineage.columns.model import Dependencies, OutputColumn


@dataclass(frozen=True)
class Write:
    """One sink of the script: the dataset written (``None`` if not resolved) and its column lineage."""

    site: Site
    target: str | None
    columns: tuple[OutputColumn, ...]
    dataset: Dependencies
    inputs: frozenset[str]
    problems: tuple[Problem, ...] = ()


@dataclass
class ScriptAnalysis:
    writes: list[Write] = field(default_factory=list)
    reads: set[str] = field(default_factory=set)
    """Every dataset the script reads, whether or not it reaches a sink."""
    problems: list[Problem] = field(default_factory=list)
    schemas: dict[str, TableSchema] = field(default_factory=dict)
    python2: bool = False
    """The script is Python 2 (Glue 0.9) and was analysed after its Python 2 syntax was rewritten."""
    """Known columns of datasets outside the catalog (a JDBC or DynamoDB table the catalog describes)."""

    def unresolved(self) -> list[Problem]:
        found = list(self.problems)
        for write in self.writes:
            found.extend(write.problems)
        if not self.writes:
            found.append(Problem(0, "the script writes nothing that is recognised as a sink"))
        return sorted(merge_problems(found), key=lambda p: (p.file != "", p.file, p.line, p.message))


@dataclass(frozen=True)
class ScriptContext:
    job_name: str
    arguments: Mapping[str, str]
    """The run's arguments, ``--NAME`` keys."""
    catalog: GlueCatalog
    modules: Mapping[str, ModuleSource] = field(default_factory=dict)
    libraries: frozenset[str] = frozenset()
    """Top-level names of pip modules the job installs (``--additional-python-modules``)."""
    region: str | None = None
    account: str | None = None
    """Where the job runs: DynamoDB tables and Kinesis streams are named with them."""
