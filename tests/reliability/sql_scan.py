"""A static check that SQL is only assembled from checked names and quoted literals (no tests here).

Every f-string whose text contains an SQL keyword (upper case: ``SELECT``, ``ALTER TABLE``, ...) is a
piece of SQL, unless it is a message (an exception, a log line). Each value interpolated into such a
piece must be one of:

- a call of a quoting or checking helper of ``lakeline.names`` / ``lakeline.partitions``;
- a variable of the same function assigned only from such values (or from SQL pieces that pass this
  check), or a tuple unpacked from ``check_qualified_table``;
- ``", ".join(...)`` of such values;
- a parameter or expression written down in ``TRUSTED`` with the reason it is safe.

Anything else is reported with its file, line and the expression.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SQL_KEYWORD = re.compile(
    r"\b(SELECT|INSERT|CREATE|ALTER|DROP|TABLE|PARTITION|WHERE|FROM|LOCATION|UNION|DESCRIBE|SHOW|MSCK|JOIN|VALUES)\b"
)
# Helpers that return a checked name, a quoted literal, or SQL built from those.
QUOTING_HELPERS = frozenset(
    {
        "ddl_name",
        "dml_name",
        "string_literal",
        "check_identifier",
        "check_partition_value",
        "check_run_token",
        "partition_literal",
        "partition_filter",
        "partition_spec_sql",
        "ctas_sql",
        "swap_statements",
        "temp_table_name",
    }
)
# SQL builders of the scanned modules: safe because their own f-strings pass this scan.
SCANNED_BUILDERS = frozenset({"_rows_sql"})
UNPACKS_CHECKED = frozenset({"check_qualified_table"})
# Messages, not SQL: f-strings passed to these (or raised) are never executed.
MESSAGE_CALLS = re.compile(
    r"(Error|Exception|InvalidKey|Failed|Warning)$|^(debug|info|warning|error|exception|notify|add_note|fail|print|echo|log)$"
)
# (function, parameter or expression) → why an interpolation of it is safe.
TRUSTED: dict[tuple[str, str], str] = {
    ("ctas_sql", "select"): "a SELECT its callers build from dml_name/partition_filter (plan_stage_a) or "
    "from sqlglot's rendering of a parsed step (plan_stage_b), both checked by this scan",
    ("ctas_sql", "table_settings.bucket_count"): "an int, validated by the TableSettings model",
    ("_rows_sql", "query.sql('athena')"): "sqlglot's rendering of the step statement the user wrote as SQL, "
    "parsed first (a step is SQL by contract; only Lakeline's names are spliced around it)",
    ("_rows_sql", "kind"): "a type rendered by sqlglot's DataType.build from the catalog (_hive_type_to_athena)",
    ("plan_type_check", "_storage(schema, encoding)"): "a text table's format clause whose only values are "
    "string_literal's (the raw table's delimiter, quote and encoding) or the JSON SerDe's constant name",
    ("plan_type_check", "' AND '.join(where)"): "a condition of dml_name'd columns compared with string_literal'd "
    "names",
    ("plan_type_check", "condition"): "a column's condition: its dml_name and _valid's fixed patterns and types",
    ("plan_type_check", "number"): "an int from enumerate",
    ("plan_type_check", "SHOWN_VALUES"): "an int constant",
    ("plan_type_check", "SHOWN_CHARACTERS"): "an int constant",
    ("plan_type_check", "PREFIX"): "a constant without quotes",
    ("symlink_table_ddl", "listed_columns"): "ddl_name'd names, each with STRING (plan_type_check) or a type "
    "checked against HIVE_TYPE (plan_source: letters, digits, '_', '<>(),:' and spaces: no quote, comment or "
    "statement end)",
    ("symlink_table_ddl", "row_format"): "_row_format's clause, whose only values are string_literal's (the SerDe, "
    "the raw table's delimiter and quote)",
}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    function: str
    expression: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} in {self.function}(): {self.expression}"


def _call_name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return func.id
        if isinstance(func, ast.Attribute):
            return func.attr
    return ""


def _is_sql(node: ast.JoinedStr) -> bool:
    text = "".join(part.value for part in node.values if isinstance(part, ast.Constant) and isinstance(part.value, str))
    return bool(SQL_KEYWORD.search(text))


class _FunctionScan:
    def __init__(self, path: str, function: ast.FunctionDef | ast.AsyncFunctionDef, parents: dict[ast.AST, ast.AST]):
        self.path = path
        self.function = function
        self.parents = parents
        self.assignments: dict[str, list[ast.expr]] = {}
        self.checked_unpacked: set[str] = set()
        for node in ast.walk(function):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    self._record(target, node.value)
            elif isinstance(node, ast.AugAssign | ast.AnnAssign) and node.value is not None:
                self._record(node.target, node.value)

    def _record(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.assignments.setdefault(target.id, []).append(value)
        elif isinstance(target, ast.Tuple) and _call_name(value) in UNPACKS_CHECKED:
            self.checked_unpacked.update(t.id for t in target.elts if isinstance(t, ast.Name))
        elif isinstance(target, ast.Tuple):
            for element in target.elts:
                if isinstance(element, ast.Name):
                    self.assignments.setdefault(element.id, []).append(ast.Constant(value=None))
                    self.assignments[element.id].append(ast.Name(id="<unpacked>"))

    def trusted(self, expression: ast.expr) -> bool:
        return (self.function.name, ast.unparse(expression)) in TRUSTED

    def safe(self, node: ast.expr, seen: frozenset[str] = frozenset()) -> bool:
        if self.trusted(node):
            return True
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.JoinedStr):
            return all(self.safe(part.value, seen) for part in node.values if isinstance(part, ast.FormattedValue))
        if isinstance(node, ast.FormattedValue):
            return self.safe(node.value, seen)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.safe(node.left, seen) and self.safe(node.right, seen)
        if isinstance(node, ast.IfExp):
            return self.safe(node.body, seen) and self.safe(node.orelse, seen)
        if isinstance(node, ast.Call):
            name = _call_name(node)
            if name in QUOTING_HELPERS or name in SCANNED_BUILDERS:
                return True
            if name == "join" and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Constant):
                return len(node.args) == 1 and self._safe_elements(node.args[0], seen)
            return False
        if isinstance(node, ast.Name):
            if node.id in self.checked_unpacked:
                return True
            if node.id in seen:
                return True  # a loop of assignments (x += ...): each assignment is checked on its own
            values = self.assignments.get(node.id)
            if values is None:
                return False  # a parameter or a global: only if TRUSTED
            return all(self.safe(value, seen | {node.id}) for value in values)
        return False

    def _safe_elements(self, node: ast.expr, seen: frozenset[str]) -> bool:
        if isinstance(node, ast.GeneratorExp | ast.ListComp):
            return self.safe(node.elt, seen)
        if isinstance(node, ast.List | ast.Tuple):
            return all(self.safe(element, seen) for element in node.elts)
        if isinstance(node, ast.Name):
            values = self.assignments.get(node.id, [])
            appended = [
                call.args[0]
                for call in ast.walk(self.function)
                if isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "append"
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == node.id
                and call.args
            ]
            return (
                bool(values)
                and all(self._safe_elements(v, seen) for v in values)
                and all(self.safe(a, seen) for a in appended)
            )
        return self.safe(node, seen)

    def is_message(self, node: ast.AST) -> bool:
        current: ast.AST | None = node
        while current is not None and current is not self.function:
            parent = self.parents.get(current)
            if isinstance(parent, ast.Raise):
                return True
            if isinstance(parent, ast.Call) and MESSAGE_CALLS.search(_call_name(parent)):
                return True
            current = parent
        return False

    def findings(self) -> Iterator[Finding]:
        for node in ast.walk(self.function):
            if not isinstance(node, ast.JoinedStr) or not _is_sql(node) or self.is_message(node):
                continue
            if self._owner(node) is not self.function:
                continue  # a nested function is scanned on its own
            for part in node.values:
                if isinstance(part, ast.FormattedValue) and not self.safe(part.value):
                    yield Finding(self.path, node.lineno, self.function.name, ast.unparse(part.value))

    def _owner(self, node: ast.AST) -> ast.AST | None:
        current = self.parents.get(node)
        while current is not None and not isinstance(current, ast.FunctionDef | ast.AsyncFunctionDef):
            current = self.parents.get(current)
        return current


def scan_source(path: str, source: str) -> list[Finding]:
    tree = ast.parse(source)
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    findings: list[Finding] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            findings.extend(_FunctionScan(path, node, parents).findings())
    return findings


def python_files(root: Path, relative_paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for relative in relative_paths:
        target = root / relative
        files += sorted(target.rglob("*.py")) if target.is_dir() else [target]
    return files


def scan(root: Path, relative_paths: list[str]) -> list[Finding]:
    findings: list[Finding] = []
    for path in python_files(root, relative_paths):
        findings.extend(scan_source(str(path.relative_to(root)), path.read_text()))
    return findings


def defined_functions(root: Path, relative_paths: list[str]) -> set[str]:
    names: set[str] = set()
    for path in python_files(root, relative_paths):
        tree = ast.parse(path.read_text())
        names |= {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
    return names
