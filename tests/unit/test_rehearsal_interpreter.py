"""The rehearsal's ASL interpreter (``run_execution.mjs`` over aws-local-stepfunctions) where it had to be
corrected to act as Step Functions (``interpreter_fixes.mjs``)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from lakeline.runtimes.deployed.local_aws.executions import EXECUTION_RUNNER


def run(definition: dict[str, Any], input: Any) -> dict[str, Any]:
    request = {"start": "execution", "definition": definition, "input": input, "context": {}}
    done = subprocess.run(
        ["node", str(EXECUTION_RUNNER)],
        input=json.dumps(request) + "\n",
        capture_output=True,
        text=True,
        cwd=EXECUTION_RUNNER.parent,
    )
    (line,) = done.stdout.splitlines()
    message = json.loads(line)
    assert message["execution"] == "execution"
    return dict(message["done"])


def test_json_to_string_keeps_the_escapes_of_strings_with_quotes_and_backslashes() -> None:
    """aws-local-stepfunctions 3.0.0 took every backslash out of the result: a stage plan (its arrivals
    are JSON strings) became invalid JSON as a Glue job's ``--plan``."""
    plan = {"arrivals": ['{"key": "a/b.csv"}'], "path": "C:\\data", "quote": "it's"}
    definition = {
        "StartAt": "P",
        "States": {"P": {"Type": "Pass", "Parameters": {"plan.$": "States.JsonToString($.plan)"}, "End": True}},
    }
    done = run(definition, {"plan": plan})
    assert done["status"] == "SUCCEEDED", done
    assert json.loads(done["output"]["plan"]) == plan


def test_a_string_literal_is_unescaped_as_step_functions_does() -> None:
    definition = {
        "StartAt": "P",
        "States": {
            "P": {
                "Type": "Pass",
                "Parameters": {"text.$": "States.Format('\\{ {} \\} it\\'s', $.name)"},
                "End": True,
            }
        },
    }
    done = run(definition, {"name": "ada"})
    assert done == {"status": "SUCCEEDED", "output": {"text": "{ ada } it's"}}, done


def test_a_failed_map_iteration_hands_its_index_to_the_map_s_catch_in_its_cause() -> None:
    """The shape of the stage B steps Map (#21): the Map's Catch gets the failed iteration's Error and a
    Cause that starts with its index, and no later iteration runs (``MaxConcurrency`` 1)."""
    failing = {
        "Type": "Pass",
        "Parameters": {
            "Error": "States.TaskFailed",
            "Cause.$": "States.Format('steps[{}] failed: {}', $.index, $.value)",
        },
        "Next": "Failed",
    }
    iteration = {
        "ProcessorConfig": {"Mode": "INLINE"},
        "StartAt": "Step",
        "States": {
            "Step": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.value", "StringEquals": "bad", "Next": "FailedAt"}],
                "Default": "Ran",
            },
            "Ran": {"Type": "Pass", "Parameters": {"ran.$": "$.index"}, "End": True},
            "FailedAt": failing,
            "Failed": {"Type": "Fail", "ErrorPath": "$.Error", "CausePath": "$.Cause"},
        },
    }
    steps = {
        "Type": "Map",
        "ItemsPath": "$.items",
        "MaxConcurrency": 1,
        "ItemSelector": {"value.$": "$$.Map.Item.Value", "index.$": "$$.Map.Item.Index"},
        "ItemProcessor": iteration,
        "ResultPath": "$.ran",
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Caught"}],
        "End": True,
    }
    definition = {"StartAt": "Steps", "States": {"Steps": steps, "Caught": {"Type": "Pass", "End": True}}}
    done = run(definition, {"items": ["a", "bad", "c"]})
    assert done["status"] == "SUCCEEDED", done
    assert done["output"]["error"] == {"Error": "States.TaskFailed", "Cause": "steps[1] failed: bad"}
    assert run(definition, {"items": ["a", "b"]})["output"]["ran"] == [{"ran": 0}, {"ran": 1}]


def test_gap_an_explicit_result_path_of_the_whole_state_nests_the_result() -> None:
    """Step Functions: ``"ResultPath": "$"`` makes the result the state's output. aws-local-stepfunctions
    3.0.0 puts it under a key ``$`` instead, so the definitions leave ResultPath out to mean the same
    (a stage B step's task, ``stacks.constructs.athena``). An upgrade that fixes this fails here."""
    definition = {
        "StartAt": "P",
        "States": {"P": {"Type": "Pass", "Parameters": {"a": 1}, "ResultPath": "$", "End": True}},
    }
    assert run(definition, {"x": 2})["output"] == {"x": 2, "$": {"a": 1}}


def test_one_node_process_runs_many_executions_side_by_side() -> None:
    """Node's start and the interpreter's load are paid once per deployment, not once per execution (#36):
    two executions run at once in one process, each task's reply reaching its own execution."""
    from lakeline.runtimes.deployed.local_aws.executions import Interpreter

    definition = {
        "StartAt": "Work",
        "States": {"Work": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "End": True}},
    }
    interpreter = Interpreter("node")
    try:
        first = interpreter.start("first", {"definition": definition, "input": {"n": 1}, "context": {}})
        second = interpreter.start("second", {"definition": definition, "input": {"n": 2}, "context": {}})
        process = interpreter._process
        first_task, second_task = first.get(timeout=60), second.get(timeout=60)
        assert first_task is not None and second_task is not None
        assert (first_task["task"]["input"], second_task["task"]["input"]) == ({"n": 1}, {"n": 2})
        interpreter.send("second", {"id": second_task["task"]["id"], "output": "two"})
        interpreter.send("first", {"id": first_task["task"]["id"], "error": "Boom", "cause": "failed"})
        assert second.get(timeout=60) == {"done": {"status": "SUCCEEDED", "output": "two"}}
        assert first.get(timeout=60) == {"done": {"status": "FAILED", "error": "Boom", "cause": "failed"}}
        assert interpreter._process is process and process is not None and process.poll() is None
    finally:
        interpreter.stop()


def big_input(size: int) -> dict[str, Any]:
    """An execution input of about ``size`` bytes as JSON."""
    return {"blob": "x" * size}


def doubled(next_or_end: dict[str, Any]) -> dict[str, Any]:
    """A Pass state whose output holds its input's blob twice."""
    return {"Type": "Pass", "Parameters": {"a.$": "$.blob", "b.$": "$.blob"}, **next_or_end}


def test_a_state_output_over_256_kib_fails_the_execution_with_data_limit_exceeded() -> None:
    """Step Functions' payload quota (#39): the interpreter passed on data of any size, so a plan that fails in
    AWS passed the rehearsal."""
    # The next state's output is small: the runner's one-shot process need not print a large one.
    small = {"Type": "Pass", "Result": "small", "End": True}
    definition = {"StartAt": "Double", "States": {"Double": doubled({"Next": "Small"}), "Small": small}}
    done = run(definition, big_input(140 * 1024))
    assert done["status"] == "FAILED", done
    assert done["error"] == "States.DataLimitExceeded"
    assert "'Double'" in done["cause"] and "maximum number of bytes" in done["cause"]
    # Just under the quota, the same state succeeds.
    assert run(definition, big_input(120 * 1024)) == {"status": "SUCCEEDED", "output": "small"}
    # A state's output over the quota (its input is not: a Result replaces it).
    result = {"Type": "Pass", "Result": {"blob": "x" * (300 * 1024)}, "Next": "Small"}
    done = run({"StartAt": "Big", "States": {"Big": result, "Small": small}}, {})
    assert done["error"] == "States.DataLimitExceeded" and "'Big' returned a result" in done["cause"], done


def test_no_catch_takes_data_limit_exceeded_not_even_states_all() -> None:
    """A terminal error: the Map's ``States.ALL`` Catch takes an iteration's ordinary failure, not this one."""

    def machine(item: dict[str, Any]) -> dict[str, Any]:
        return {
            "StartAt": "Each",
            "States": {
                "Each": {
                    "Type": "Map",
                    "ItemsPath": "$.items",
                    "ItemSelector": {"blob.$": "$.blob"},
                    "ItemProcessor": {"StartAt": "Item", "States": {"Item": item}},
                    "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught", "ResultPath": "$.error"}],
                    "ResultPath": None,
                    "End": True,
                },
                "Caught": {"Type": "Pass", "Result": "caught", "End": True},
            },
        }

    failing = {"Type": "Fail", "Error": "Ordinary", "Cause": "an ordinary failure"}
    assert run(machine(failing), {"items": [1], "blob": ""}) == {"status": "SUCCEEDED", "output": "caught"}
    done = run(machine(doubled({"End": True})), {"items": [1], **big_input(140 * 1024)})
    assert done["status"] == "FAILED" and done["error"] == "States.DataLimitExceeded", done
