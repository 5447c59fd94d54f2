"""The string contracts between the stacks and the Python code, spelled from the models.

A state machine reads its input by JSON path (``$.plan.register_raw``) and a handler reads its
environment by variable name (``PIPELINE_STATE_TABLE``); both are names of model fields. The constructs
build them here, from the models, so a renamed field fails the synth (``ContractError``) instead of a
deployment. ``tests/infrastructure/test_contracts.py`` checks the synthesized templates as well.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from stage_a.plan import StageAPlan
from stage_b.messages import StageBMessage
from stage_b.plan import PlannedStep, StageBPlan


class ContractError(KeyError):
    """A construct names a field its model does not have."""


def field_names(model: type[Any], *, by_alias: bool = False) -> list[str]:
    """The fields of a dataclass or a pydantic model (pydantic: their aliases with ``by_alias``)."""
    if dataclasses.is_dataclass(model):
        return [field.name for field in dataclasses.fields(model)]
    if isinstance(model, type) and issubclass(model, BaseModel):
        return [(field.alias or name) if by_alias else name for name, field in model.model_fields.items()]
    raise TypeError(f"{model!r} is neither a dataclass nor a pydantic model")


def check_field(model: type[Any], name: str) -> str:
    if name not in field_names(model):
        raise ContractError(f"{model.__name__} has no field {name!r}: the stacks and the model disagree")
    return name


@dataclass(frozen=True)
class InputPath:
    """The JSON path of one model in a state's input: ``InputPath("$.plan", StageAPlan)``."""

    root: str
    model: type[Any]

    def __str__(self) -> str:
        return self.root

    def __call__(self, name: str) -> str:
        """The path of the field ``name``: ``$.plan.register_raw``."""
        return f"{self.root}.{check_field(self.model, name)}"


def handler_environment(model: type[BaseModel], **values: str) -> dict[str, str]:
    """Environment variables for a handler that reads ``model`` with ``load_environment``, in the order
    given: ``handler_environment(RouterEnvironment, stage_bucket=...)``."""
    return {variable(model, name): value for name, value in values.items()}


def variable(model: type[BaseModel], name: str) -> str:
    """The environment variable ``load_environment`` reads ``model``'s field ``name`` from: the field's
    alias, else its name in upper case."""
    return model.model_fields[check_field(model, name)].alias or name.upper()


# What the routers start the state machines with (stage_a.start, stage_b.start): {"plan", "arrival"} and
# {"message", "plan"}; a stage B step is one item of the plan's steps in the Map that runs them.
STAGE_A_PLAN = InputPath("$.plan", StageAPlan)
STAGE_B_PLAN = InputPath("$.plan", StageBPlan)
STAGE_B_MESSAGE = InputPath("$.message", StageBMessage)
STAGE_B_STEP = InputPath("$$.Map.Item.Value", PlannedStep)
