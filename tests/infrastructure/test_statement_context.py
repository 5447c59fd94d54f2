"""A stage B step runs in AWS against the database the local runner gives it (#20, defect 2).

Locally ``execute_stage_b`` runs a step with ``database=step.db``; in AWS that is the Athena task's
``QueryExecutionContext``. Without it a seed-style step with unqualified table names works locally and
fails in AWS (Athena resolves them in ``default``). The statements Lakeline writes itself name their
databases and run without one.
"""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Template

from tests.infrastructure.test_stacks import state_machine_definition, synthesized


@pytest.fixture(scope="module")
def pipeline() -> Template:
    return synthesized("athena")[1]


def states_of(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every state, those inside Map item processors included."""
    found: dict[str, dict[str, Any]] = {}
    for name, state in definition["States"].items():
        found[name] = state
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor:
            found.update(states_of(processor))
    return found


def athena_tasks(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: state
        for name, state in states_of(definition).items()
        if state.get("Resource", "").endswith(":athena:startQueryExecution.sync")
    }


def test_a_stage_b_step_runs_in_its_own_db(pipeline: Template) -> None:
    definition = state_machine_definition(pipeline, "StageB")
    (steps,) = [s for s in definition["States"].values() if s.get("ItemsPath") == "$.plan.steps"]
    assert steps["ItemSelector"]["db.$"] == "$$.Map.Item.Value.db"
    (step,) = athena_tasks(steps["ItemProcessor"]).values()
    assert step["Parameters"]["QueryExecutionContext"] == {"Database.$": "$.db"}


@pytest.mark.parametrize("stage", ["StageA", "StageB"])
def test_the_statements_lakeline_writes_name_their_tables_in_full(pipeline: Template, stage: str) -> None:
    """Only a step runs in a query context: every other statement names its databases itself, so it
    needs none (and none would be wrong)."""
    tasks = athena_tasks(state_machine_definition(pipeline, stage))
    assert len(tasks) >= 3
    with_context = sorted(name for name, task in tasks.items() if "QueryExecutionContext" in task["Parameters"])
    assert with_context == (["RunStepsStep"] if stage == "StageB" else [])
