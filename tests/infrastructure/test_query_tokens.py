"""Idempotent query starts (#40): every Athena task of every state machine sends a ``ClientRequestToken`` derived
from the execution and the state (``stacks.constructs.athena.client_request_token``), so a start the task repeats
gets the query already started instead of running the same write twice; and nothing brings a token back to an
ended query: no Athena task retries an error a query that ran ends with, and none is on a loop."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import botocore.session
import pytest
from aws_cdk.assertions import Template

from tests.infrastructure.test_stacks import resources, state_machine_definition, synthesized

ATHENA = ":athena:startQueryExecution.sync"
ENDED_QUERY_ERRORS = {"States.ALL", "States.TaskFailed", "States.Timeout", "States.HeartbeatTimeout"}
"""What a task whose query ran ends with (a failed query is ``States.TaskFailed``, one past the task's timeout
``States.Timeout``): a Retry of these would start with the same token and get the ended query back."""
TOKEN = re.compile(
    r"States\.Hash\(States\.Format\('\{\}/(?P<state>\w+)(?P<indexed>/\{\})?', \$\$\.Execution\.Id"
    r"(?:, (?P<index>\$\.\w+))?\), 'SHA-256'\)"
)
SHA_256_HEX_LENGTH = 64


def machines(pipeline: Template) -> dict[str, dict[str, Any]]:
    """Each state machine's definition, by its logical id's prefix."""
    return {
        name: state_machine_definition(pipeline, name)
        for name in resources(pipeline, "AWS::StepFunctions::StateMachine")
    }


def athena_tasks(
    states: dict[str, Any], selector: dict[str, Any] | None = None
) -> Iterator[tuple[str, dict[str, Any], dict[str, Any] | None]]:
    """(name, state, the ItemSelector of the Map it runs in or None) of every Athena task, at any depth."""
    for name, state in states.items():
        if state.get("Resource", "").endswith(ATHENA):
            yield name, state, selector
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor:
            assert selector is None, f"{name}: a Map in a Map would need both indexes in its tasks' tokens"
            yield from athena_tasks(processor["States"], state.get("ItemSelector") or {})


def on_a_loop(states: dict[str, Any]) -> set[str]:
    """The states of ``states`` (one level) from which a transition leads back to themselves."""

    def following(state: dict[str, Any]) -> set[str]:
        found = {state.get("Next"), state.get("Default")}
        found |= {choice.get("Next") for choice in state.get("Choices", [])}
        found |= {catch.get("Next") for catch in state.get("Catch", [])}
        return {name for name in found if name}

    graph = {name: following(state) for name, state in states.items()}
    looping = set()
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            name = todo.pop()
            if name == start:
                looping.add(start)
                break
            if name not in seen:
                seen.add(name)
                todo.extend(graph[name])
    return looping


@pytest.mark.parametrize("engine", ["athena", "spark"])
def test_every_query_start_sends_a_token_of_its_execution_state_and_iteration(engine: str) -> None:
    found = 0
    for machine, definition in machines(synthesized(engine)[1]).items():
        for name, state, selector in athena_tasks(definition["States"]):
            found += 1
            token = state["Parameters"].get("ClientRequestToken.$", "")
            parsed = TOKEN.fullmatch(token)
            assert parsed is not None, f"{machine}.{name}: {token!r}"
            assert parsed["state"] == name, f"{machine}.{name} hashes another state's name: {token}"
            if selector is None:
                assert parsed["index"] is None, f"{machine}.{name}"
            else:  # each iteration of a Map starts its own query
                assert parsed["indexed"] and selector.get(f"{parsed['index'][2:]}.$") == "$$.Map.Item.Index", (
                    f"{machine}.{name}: {token} with {selector}"
                )
    assert found >= (10 if engine == "athena" else 0)


def test_the_token_is_as_long_as_athena_takes() -> None:
    """A SHA-256 in hexadecimal: within the length ``StartQueryExecution`` accepts (its API model says)."""
    model = botocore.session.get_session().get_service_model("athena")
    shape = model.operation_model("StartQueryExecution").input_shape.members["ClientRequestToken"]
    assert shape.metadata["min"] <= SHA_256_HEX_LENGTH <= shape.metadata["max"]


@pytest.mark.parametrize("engine", ["athena", "spark"])
def test_no_athena_task_retries_an_ended_query_or_runs_twice_in_an_execution(engine: str) -> None:
    """With the same token, a retry after the query ran and failed (or a second pass through the state) would get
    the ended query back instead of a new run; the tasks retry only errors of the API calls (throttling, Athena's
    internal errors), after which the query the token started, if any, is the one to wait for."""
    for machine, definition in machines(synthesized(engine)[1]).items():
        levels = [definition["States"]]
        while levels:
            states = levels.pop()
            looping = on_a_loop(states)
            for name, state in states.items():
                processor = state.get("ItemProcessor") or state.get("Iterator")
                if processor:
                    levels.append(processor["States"])
                if not state.get("Resource", "").endswith(ATHENA):
                    continue
                assert name not in looping, f"{machine}.{name} is on a loop: its token would repeat"
                retried = {error for retry in state.get("Retry", []) for error in retry["ErrorEquals"]}
                assert not retried & ENDED_QUERY_ERRORS, f"{machine}.{name} retries {retried & ENDED_QUERY_ERRORS}"
