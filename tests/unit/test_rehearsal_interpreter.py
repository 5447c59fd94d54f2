"""The rehearsal's ASL interpreter (``run_execution.mjs`` over aws-local-stepfunctions) where it had to be
corrected to act as Step Functions (``interpreter_fixes.mjs``)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from lakeline.local.rehearsal.executions import RUNNER


def run(definition: dict[str, Any], input: Any) -> dict[str, Any]:
    request = {"definition": definition, "input": input, "context": {}}
    done = subprocess.run(
        ["node", str(RUNNER)], input=json.dumps(request) + "\n", capture_output=True, text=True, cwd=RUNNER.parent
    )
    (line,) = done.stdout.splitlines()
    return dict(json.loads(line)["done"])


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
