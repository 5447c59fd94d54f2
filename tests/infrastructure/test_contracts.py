"""The string contracts between the synthesized stacks and the Python code, tied to the models: every
``$.plan.<field>`` and ``$.message.<field>`` path in the state machines names a field of the plan or
message the routers start them with, and every environment variable a handler requires is set on its
function. A renamed plan field or environment variable fails here, not in a deployment."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template
from pydantic import BaseModel, create_model

from lakeline.lambda_support import RouterEnvironment
from lakeline.run_order import STAGE_A, STAGE_B
from stacks import contracts
from stacks.constructs import engines
from stacks.constructs import stage as stage_module
from stacks.contracts import (
    STAGE_A_PLAN,
    STAGE_B_STEP,
    ContractError,
    InputPath,
    field_names,
    handler_environment,
    variable,
)
from stage_a.plan import StageAPlan
from stage_b.messages import StageBMessage
from stage_b.plan import StageBPlan
from tests.infrastructure.test_stacks import (
    functions_by_handler,
    resources,
    state_machine_definition,
    synth,
    synthesized,
)

REPO = Path(__file__).parents[2]
PATH = re.compile(r"\$\.(plan|message|arrival)((?:\.[A-Za-z_][A-Za-z0-9_]*)*)")


@pytest.fixture(scope="module", params=["athena", "spark"])
def pipeline(request: pytest.FixtureRequest) -> Template:
    return synthesized(request.param)[1]


def json_paths(value: Any) -> set[str]:
    """Every ``$.plan...``, ``$.message...`` or ``$.arrival...`` path in a state machine definition."""
    if isinstance(value, dict):
        return {path for item in value.values() for path in json_paths(item)}
    if isinstance(value, list):
        return {path for item in value for path in json_paths(item)}
    if isinstance(value, str):
        return {match.group(0) for match in PATH.finditer(value)}
    return set()


def fields_of(model: type) -> set[str]:
    if dataclasses.is_dataclass(model):
        return {field.name for field in dataclasses.fields(model)}
    assert issubclass(model, BaseModel)
    return set(model.model_fields)


@pytest.mark.parametrize(("stage", "inputs"), [("StageA", {"plan": StageAPlan}), ("StageB", {"plan": StageBPlan})])
def test_every_json_path_of_a_state_machine_names_a_field_of_its_input(
    pipeline: Template, stage: str, inputs: dict[str, type]
) -> None:
    inputs = {**inputs, "message": StageBMessage}
    paths = json_paths(state_machine_definition(pipeline, stage))
    assert any(path.startswith("$.plan.") for path in paths)
    unknown = []
    for path in sorted(paths):
        root, _, rest = path.removeprefix("$.").partition(".")
        if not rest or root not in inputs:  # the whole plan, or the arrival (its model is stage_a's own)
            continue
        if rest.split(".")[0] not in fields_of(inputs[root]):
            unknown.append(path)
    assert unknown == [], f"{stage}: paths naming no field of the models: {unknown}"


def required_variables(handler_package: str) -> set[str]:
    """The environment variables a handler module cannot do without: the required fields of the models
    it reads the environment into (``load_environment(Model, ...)``: the field's alias, else its name in
    upper case, as ``stacks.contracts.variable`` spells them)."""
    module = importlib.import_module(f"lambdas.{handler_package}.handler")
    source = ast.parse(Path(module.__file__ or "").read_text())
    required: set[str] = set()
    for node in ast.walk(source):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "load_environment" and isinstance(node.args[0], ast.Name):
            model = getattr(module, node.args[0].id)
            required |= {variable(model, name) for name, field in model.model_fields.items() if field.is_required()}
        assert not (
            isinstance(func, ast.Attribute) and func.attr == "model_validate" and "environ" in ast.unparse(node)
        ), f"{handler_package} reads its environment without load_environment"
    return required


def test_every_function_gets_the_environment_its_handler_requires(pipeline: Template) -> None:
    functions = functions_by_handler(pipeline)
    assert len(functions) >= 10
    checked = 0
    for package, function in sorted(functions.items()):
        variables = set(function.get("Environment", {}).get("Variables", {}))
        missing = required_variables(package) - variables
        assert not missing, f"{package} requires {sorted(missing)}, which its function does not set"
        checked += bool(required_variables(package))
    assert checked >= 8  # the check read the models of most handlers, not none


def test_the_json_path_reader_sees_what_it_must(pipeline: Template) -> None:
    """The path scan can fail: a definition naming a field no plan has is reported."""
    definition = state_machine_definition(pipeline, "StageA")
    assert "$.plan.publish" in json_paths(definition)
    assert json_paths({"ItemsPath": "$.plan.no_such_field", "x": ["$.message.trigger.run"]}) == {
        "$.plan.no_such_field",
        "$.message.trigger.run",
    }
    assert "no_such_field" not in fields_of(StageAPlan)
    assert resources(pipeline, "AWS::StepFunctions::StateMachine")
    assert json.dumps(definition)  # a plain JSON document once the tokens are replaced


def states_of(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every state of a definition, those of Map item processors included."""
    found: dict[str, dict[str, Any]] = {}
    for name, state in definition.get("States", {}).items():
        found[name] = state
        for key in ("ItemProcessor", "Iterator"):
            if key in state:
                found |= states_of(state[key])
    return found


@pytest.mark.parametrize(("stage", "accepted"), [("StageA", STAGE_A.failed_steps), ("StageB", STAGE_B.failed_steps)])
def test_every_failed_step_a_state_machine_marks_is_one_its_failure_handler_accepts(
    pipeline: Template, stage: str, accepted: frozenset[str]
) -> None:
    """``accepted``: the steps the stage's failure model takes (test_failures_surface: it refuses the rest)."""
    marked = {
        state["Result"]
        for state in states_of(state_machine_definition(pipeline, stage)).values()
        if state.get("ResultPath") == "$.failed_step"
    }
    assert marked, f"{stage}: no failure marker found"
    assert marked <= accepted, f"{stage} marks {sorted(marked - accepted)}, which its failure handler refuses"


def renamed(model: type, old: str, new: str) -> type:
    """A stand-in for ``model`` whose field ``old`` is called ``new``."""
    return dataclasses.make_dataclass(model.__name__, [new if name == old else name for name in field_names(model)])


def test_the_stacks_spell_json_paths_from_the_plan_models() -> None:
    assert STAGE_A_PLAN("register_raw") == "$.plan.register_raw"
    assert STAGE_B_STEP("sql") == "$$.Map.Item.Value.sql"
    with pytest.raises(ContractError, match="no field 'register_raw'"):
        InputPath("$.plan", renamed(StageAPlan, "register_raw", "raw_partition_sql"))("register_raw")
    assert variable(RouterEnvironment, "state_machine_arn") == "STATE_MACHINE_ARN"
    with pytest.raises(ContractError):
        handler_environment(RouterEnvironment, state_machine="arn")


@pytest.mark.parametrize("engine", ["athena", "spark"])
@pytest.mark.parametrize(
    ("target", "model", "field"), [("STAGE_A_PLAN", StageAPlan, "mode"), ("STAGE_B_PLAN", StageBPlan, "drop_temp")]
)
def test_a_renamed_plan_field_fails_the_synth(
    monkeypatch: pytest.MonkeyPatch, engine: str, target: str, model: type, field: str
) -> None:
    """What a rename of a plan field the state machines read does: the stacks refuse to synthesize."""
    path = InputPath("$.plan", renamed(model, field, f"{field}_renamed"))
    for module in (contracts, engines):
        monkeypatch.setattr(module, target, path)
    with pytest.raises(ContractError, match=f"no field '{field}'"):
        synth(engine)


def test_a_renamed_environment_field_fails_the_synth(monkeypatch: pytest.MonkeyPatch) -> None:
    fields: dict[str, Any] = {
        ("state_machine" if name == "state_machine_arn" else name): (info.annotation, info)
        for name, info in RouterEnvironment.model_fields.items()
    }
    monkeypatch.setattr(stage_module, "RouterEnvironment", create_model("RouterEnvironment", **fields))
    with pytest.raises(ContractError, match="no field 'state_machine_arn'"):
        synth("athena")
