"""One validation vocabulary: Lakeline's input error is what pydantic validators raise, and pydantic's
errors are put into words in one place."""

from __future__ import annotations

import ast
from pathlib import Path

import pydantic
import pytest
from pydantic import BaseModel, field_validator

from lakeline.dependencies.model import normalise_table_name, parse_dependency_item
from lakeline.errors import InvalidInputError, LakelineError, validated, validation_problems

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("lakeline", "stage_a", "stage_b", "stage_lineage", "stage_end", "lambdas")


class _Target(BaseModel):
    dataset: str
    count: int = 0

    @field_validator("dataset")
    @classmethod
    def _dataset(cls, value: str) -> str:
        return normalise_table_name(value, "dataset")  # raises InvalidInputError, unwrapped


def test_the_input_error_is_a_lakeline_error_and_a_value_error() -> None:
    assert issubclass(InvalidInputError, LakelineError)
    assert issubclass(InvalidInputError, ValueError)


def test_a_validator_raises_the_input_error_and_pydantic_reports_it_under_its_field() -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        _Target.model_validate({"dataset": "no_dot", "count": "many", "colour": 1})
    assert validation_problems(caught.value) == [
        "dataset: dataset 'no_dot' must be written database.table",
        "count: Input should be a valid integer, unable to parse string as an integer (got 'many')",
    ]


def test_problems_name_the_path_missing_and_unknown_fields() -> None:
    class Outer(BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid")
        targets: list[_Target]

    with pytest.raises(pydantic.ValidationError) as caught:
        Outer.model_validate({"targets": [{"dataset": "a.b"}, {}], "colour": 1})
    assert validation_problems(caught.value) == [
        "targets[1].dataset: required field is missing",
        "colour: unknown field",
    ]


def test_validated_raises_one_input_error_naming_what_and_every_problem() -> None:
    with pytest.raises(InvalidInputError) as caught:
        validated(_Target, {"count": 1}, "target")
    assert str(caught.value) == "invalid target: dataset: required field is missing"
    assert validated(_Target, {"dataset": "A.B"}, "target").dataset == "a.b"


def test_a_dependency_item_reports_a_table_name_problem_under_its_field() -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_dependency_item({"dataset": "nodot"})
    assert any(line.startswith("  - dataset: ") and "database.table" in line for line in str(caught.value).splitlines())


def _product_modules() -> list[Path]:
    return [path for package in PRODUCT for path in sorted((ROOT / package).rglob("*.py"))]


def test_pydantic_errors_are_put_into_words_only_in_lakeline_errors() -> None:
    """A second formatter of ``error.errors()`` would be a second vocabulary: it fails here."""
    formatters = []
    for path in _product_modules():
        if path == ROOT / "lakeline" / "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "errors"
                and not node.args
                and not node.keywords
            ):
                formatters.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert formatters == []


def test_no_validator_turns_the_input_error_into_a_bare_value_error() -> None:
    """``raise ValueError(str(error))`` around an ``InvalidInputError`` is what the shared type made unneeded."""
    rewrapped = []
    for path in _product_modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                call = node.exc
                if (
                    isinstance(call.func, ast.Name)
                    and call.func.id == "ValueError"
                    and len(call.args) == 1
                    and isinstance(call.args[0], ast.Call)
                    and isinstance(call.args[0].func, ast.Name)
                    and call.args[0].func.id == "str"
                ):
                    rewrapped.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert rewrapped == []


def test_a_plan_passed_through_a_state_machine_is_validated_by_its_field_types() -> None:
    """Plans are dataclasses; pydantic validates what a state machine hands back against their fields."""
    from stage_b.plan import StageBPlan

    with pytest.raises(InvalidInputError) as caught:
        StageBPlan.from_dict({"steps": [{"index": "first"}], "partition": "date=1"})
    message = str(caught.value)
    assert message.startswith("invalid stage B plan: ")
    assert "partition: Input should be a valid dictionary" in message
    assert "steps[0].index: Input should be a valid integer" in message
    assert "target_database: required field is missing" in message
