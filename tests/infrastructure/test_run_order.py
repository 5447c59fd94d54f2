"""The synthesized state machines run each stage's steps in its run order (#38, ``lakeline.run_order``), the one
the embedded runtime runs (``tests/reliability/test_embedded_catch.py``).

Each state on a success path (from ``StartAt`` along ``Next``, a Choice's branches and its ``Default``) is mapped
to the step its failure is marked as (the ``$.failed_step`` marker its Catch leads to); consecutive states of one
step (a CTAS and the DROP of its temp table) are one step. Every path must run steps of the order, in the order's
order, and end with the post-update; one path runs them all."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest

from lakeline.run_order import PUBLISHING, STAGE_A, STAGE_B, EngineName, RunOrder
from tests.infrastructure.test_stacks import state_machine_definition, synthesized

States = dict[str, dict[str, Any]]
ORDERS = {"StageA": STAGE_A, "StageB": STAGE_B}
SKIPPABLE = frozenset({"quality"})
"""Steps a path may leave out between the writes and the commit: the quality task, without checks (#41)."""


def successors(state: dict[str, Any], *, catches: bool) -> list[str]:
    """The states ``state`` may go to: its ``Next``, a Choice's branches and ``Default``, and its Catch targets
    if ``catches``."""
    found = [state["Next"]] if "Next" in state else []
    found += [choice["Next"] for choice in state.get("Choices", [])]
    found += [state["Default"]] if "Default" in state else []
    return found + ([catch["Next"] for catch in state.get("Catch", [])] if catches else [])


def is_marker(state: dict[str, Any]) -> bool:
    return state["Type"] == "Pass" and state.get("ResultPath") == "$.failed_step"


def marked_step(states: States, name: str) -> str:
    """The step ``name``'s failure is marked as: the one marker its Catch leads to, through whatever the failure
    path does first (dropping temp tables)."""
    catches = [catch["Next"] for catch in states[name].get("Catch", [])]
    assert catches, f"{name} runs on a success path without a Catch: no failed step names it"
    markers, seen, waiting = set(), set(), list(catches)
    while waiting:
        current = waiting.pop()
        if current in seen:
            continue
        seen.add(current)
        if is_marker(states[current]):
            markers.add(states[current]["Result"])
        else:
            waiting += successors(states[current], catches=True)
    assert len(markers) == 1, f"{name}'s failure is marked as {sorted(markers)}"
    return str(markers.pop())


def success_paths(states: States, start: str) -> Iterator[list[str]]:
    """Every path from ``start`` to a Succeed state, by the states' names."""

    def walk(path: list[str]) -> Iterator[list[str]]:
        state = states[path[-1]]
        if state["Type"] == "Succeed":
            yield path
        for following in successors(state, catches=False):
            assert following not in path, f"a loop on the success path at {following}"
            yield from walk([*path, following])

    return walk([start])


def steps_run(definition: dict[str, Any]) -> list[list[str]]:
    """Each success path of ``definition`` as the steps it runs, in order."""
    states = cast(States, definition["States"])
    runs = []
    for path in success_paths(states, definition["StartAt"]):
        steps: list[str] = []
        for name in path:
            if states[name]["Type"] in ("Task", "Map", "Parallel"):
                step = marked_step(states, name)
                if not steps or steps[-1] != step:
                    steps.append(step)
        runs.append(steps)
    return runs


def is_in_order(run: list[str], order: list[str]) -> bool:
    """``run`` is ``order`` with steps left out, none repeated or moved."""
    remaining = iter(order)
    return all(step in remaining for step in run)


def check(runs: list[list[str]], order: RunOrder, engine: EngineName) -> None:
    expected = [step.name for step in order.steps(engine)]
    publishing = [step.name for step in order.steps(engine) if step.kind in PUBLISHING]
    for run in runs:
        published = [step for step in run if step in publishing]
        whole = (publishing, [step for step in publishing if step not in SKIPPABLE])
        assert published == [] or published in whole, f"stage {order.stage} on {engine}: {run} publishes in part"
        assert is_in_order(run, expected), f"stage {order.stage} on {engine} runs {run}; its order is {expected}"
        assert run[-1] == "post_update", f"stage {order.stage} on {engine}: {run} does not end with the post-update"
    assert expected in runs, f"stage {order.stage} on {engine}: no path runs {expected}; they run {runs}"


@pytest.mark.parametrize("engine", ["athena", "spark"])
@pytest.mark.parametrize("stage", ["StageA", "StageB"])
def test_each_state_machine_runs_its_stages_run_order(engine: EngineName, stage: str) -> None:
    definition = state_machine_definition(synthesized(engine)[1], stage)
    check(steps_run(definition), ORDERS[stage], engine)


def test_the_walk_finds_a_step_out_of_order_or_missing() -> None:
    """The check can fail: a commit after the publish, a missing register, a step the order does not have."""
    order = [step.name for step in STAGE_A.steps("athena")]
    assert order == ["reconcile", "register", "type_check", "ctas", "quality", "commit", "publish", "post_update"]
    without_checks = [step for step in order if step != "quality"]
    check([order, without_checks, ["reconcile", "post_update"]], STAGE_A, "athena")
    for runs in (
        [["reconcile", "register", "type_check", "ctas", "quality", "publish", "commit", "post_update"]],  # swapped
        [["reconcile", "register", "type_check", "ctas", "commit", "quality", "publish", "post_update"]],  # late
        [["reconcile", "type_check", "ctas", "quality", "commit", "publish", "post_update"]],  # no path: register
        [without_checks],  # no path runs the quality checks
        [[*order[:4], "steps", *order[4:]]],  # stage B's step in stage A
        [order, ["reconcile", "register"]],  # a path that skips the post-update
        [order, ["reconcile", "ctas", "commit", "post_update"]],  # a commit without its publish
        [order, ["reconcile", "ctas", "quality", "post_update"]],  # checked, not committed
    ):
        with pytest.raises(AssertionError):
            check(runs, STAGE_A, "athena")


def test_the_walk_maps_states_through_the_failure_path_to_their_marker() -> None:
    definition = state_machine_definition(synthesized("athena")[1], "StageA")
    states = cast(States, definition["States"])
    # The CTAS's Catch drops the temp tables first; the DROP after the CTAS is the CTAS's step too.
    assert states["RunPlanCtas"]["Catch"][0]["Next"] == "RunPlanDropTempAfterFailure"
    assert marked_step(states, "RunPlanCtas") == marked_step(states, "RunPlanDropTemp") == "ctas"
    assert marked_step(states, "RunPlanTypeCheck") == "type_check"
    assert marked_step(states, "PostUpdateTask") == "post_update"
    with pytest.raises(AssertionError, match="without a Catch"):
        marked_step({"Task": {"Type": "Task", "Next": "Done"}}, "Task")


@pytest.mark.parametrize("engine", ["athena", "spark"])
@pytest.mark.parametrize("stage", ["StageA", "StageB"])
def test_the_quality_task_runs_only_with_checks_and_its_catch_goes_to_the_failure_path(
    engine: EngineName, stage: str
) -> None:
    """#41: between the writes and the commit, a Choice on the plan's ``quality`` skips the task (no cost) when the
    table has no checks; the task's failure (a blocked version) is marked ``quality`` and reaches the failure
    function, whose task is the stage's ``<stage>Record``."""
    definition = state_machine_definition(synthesized(engine)[1], stage)
    states = cast(States, definition["States"])
    (choice,) = [name for name in states if name.endswith("HasChecks")]
    (task,) = [name for name in states if name.endswith("Quality" if engine == "athena" else "QualitySpark")]
    branches = states[choice]["Choices"]
    assert branches == [{"Variable": "$.plan.quality", "IsNull": True, "Next": choice.replace("HasChecks", "Checked")}]
    assert states[choice]["Default"] == task
    assert marked_step(states, task) == "quality"
    if engine == "athena":
        assert states[task]["Parameters"]["Payload"] == {"stage": stage[-1], "plan.$": "$.plan"}
    else:
        assert states[task]["Parameters"]["Arguments"]["--mode"] == f"quality_{stage[-1].lower()}"
    marker = states[task]["Catch"][0]["Next"]
    assert states[marker]["Result"] == "quality"
    reached, waiting = set(), [marker]
    while waiting:
        current = waiting.pop()
        if current not in reached:
            reached.add(current)
            waiting += successors(states[current], catches=True)
    assert any(states[name]["Type"] == "Fail" for name in reached), "the failure path ends the execution failed"
    assert any("Record" in name and states[name]["Type"] == "Task" for name in reached), "the failure function"
