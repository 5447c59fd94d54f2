"""Each stage's run order, stated once (#38): one ``FailedStep`` type names every step of it, each stage's failure
function takes exactly its stage's steps, and ``run_in_order`` runs them in the order's order."""

from __future__ import annotations

from typing import get_args

import pydantic
import pytest

from lakeline.run_order import (
    AFTER_PUBLISH,
    STAGE_A,
    STAGE_B,
    Entering,
    FailedStep,
    RunOrder,
    RunStep,
    StepFailed,
    StepKind,
    run_in_order,
)
from stage_end.stage_a import StageAFailure
from stage_end.stage_b import StageBFailure


def test_failed_step_names_every_step_of_either_stage_and_nothing_else() -> None:
    assert set(get_args(FailedStep)) == STAGE_A.failed_steps | STAGE_B.failed_steps
    assert {"quality", "commit", "publish"} == AFTER_PUBLISH
    assert STAGE_A.failed_steps == set(get_args(FailedStep)) - {"steps"}
    assert STAGE_B.failed_steps == set(get_args(FailedStep)) - {"register", "type_check", "ctas"}


@pytest.mark.parametrize(("order", "failure"), [(STAGE_A, StageAFailure), (STAGE_B, StageBFailure)])
def test_each_failure_function_takes_its_stages_steps_and_refuses_the_others(
    order: RunOrder, failure: type[pydantic.BaseModel]
) -> None:
    for step in get_args(FailedStep):
        request = {"plan": {}, "error": {"Error": "X", "Cause": ""}, "failed_step": step}
        if step in order.failed_steps:
            assert failure.model_validate(request).model_dump()["failed_step"] == step
        else:
            with pytest.raises(pydantic.ValidationError, match="is not a step of stage"):
                failure.model_validate(request)


def test_a_write_step_must_be_one_of_the_engines() -> None:
    assert STAGE_A.write_step("athena", "register") == "register"
    with pytest.raises(ValueError, match="not one of stage A's writes on spark"):
        STAGE_A.write_step("spark", "register")


class Recorder:
    """Each kind of step's call, recording what ran; ``failing`` raises."""

    def __init__(self, failing: StepKind | None = None) -> None:
        self.ran: list[str] = []
        self.failing = failing

    def call(self, kind: StepKind) -> None:
        self.ran.append(kind)
        if kind == self.failing:
            raise RuntimeError(f"{kind} broke")

    def run(self, order: RunOrder, *, wrote: bool = True, named: FailedStep = "ctas") -> StepFailed | None:
        """``named``: the write step the writes' call enters before it runs."""
        kinds: tuple[StepKind, ...] = ("quality", "commit", "publish", "post_update")

        def writes(entering: Entering) -> None:
            entering(named)
            self.call("writes")

        return run_in_order(
            order,
            {kind: (lambda kind=kind: self.call(kind)) for kind in kinds},
            writes=writes,
            wrote=wrote,
            written=lambda: self.ran.append("written"),
        )


def test_the_steps_run_in_the_orders_order() -> None:
    recorder = Recorder()
    assert recorder.run(STAGE_A) is None
    assert recorder.ran == ["writes", "quality", "commit", "publish", "written", "post_update"]
    nothing_new = Recorder()
    assert nothing_new.run(STAGE_B, wrote=False) is None
    assert nothing_new.ran == ["writes", "written", "post_update"]


@pytest.mark.parametrize("kind", ["quality", "commit", "publish", "post_update"])
def test_a_failed_step_ends_the_run_named_as_the_order_names_it(kind: StepKind) -> None:
    recorder = Recorder(failing=kind)
    failed = recorder.run(STAGE_B)
    assert failed is not None and failed.step.name == kind and str(failed.error) == f"{kind} broke"
    assert recorder.ran[-1] == kind  # nothing after it


def test_a_failed_write_is_named_by_the_runtime_as_one_of_the_engines_writes() -> None:
    recorder = Recorder(failing="writes")
    failed = recorder.run(STAGE_A, named="type_check")
    assert failed is not None and failed.step.name == "type_check" and failed.step.kind == "writes"
    assert recorder.ran == ["writes"]
    with pytest.raises(ValueError, match="stage B's writes on athena have no step 'ctas'"):
        Recorder(failing="writes").run(STAGE_B, named="ctas")


def test_a_write_that_fails_before_any_step_began_is_named_as_the_first_of_the_engines_writes() -> None:
    def writes(_entering: Entering) -> None:
        raise RuntimeError("broke before the first statement")

    for order in (STAGE_A, STAGE_B):
        failed = run_in_order(order, {}, writes=writes, wrote=True, written=lambda: None)
        assert failed is not None and failed.step == RunStep("reconcile", "writes")
