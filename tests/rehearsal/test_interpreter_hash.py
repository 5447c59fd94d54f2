"""``States.Hash`` in the rehearsal's ASL interpreter (``interpreter_fixes.mjs``): aws-local-stepfunctions 3.0.0
gave one SHA-256 for every input longer than a block, so the Athena tasks' ``ClientRequestToken`` (a hash of the
execution's id and the state) was the same for every state and the local Athena refused the second query as a
reused token (#40). Step Functions' digests are the standard ones, in lowercase hexadecimal."""

from __future__ import annotations

import hashlib

import pytest

from tests.unit.test_rehearsal_interpreter import run

EXECUTION = "arn:aws:states:us-east-1:123456789012:execution:Lakeline-dev-Pipeline-StageAStateMachine-X1:shop-orders-1"


@pytest.mark.parametrize("algorithm", ["MD5", "SHA-1", "SHA-256", "SHA-384", "SHA-512"])
def test_states_hash_gives_the_standard_digest_of_long_inputs(algorithm: str) -> None:
    names = ["RunPlanRegisterRaw", "RunPlanCtas"]
    parameters = {f"{name}.$": f"States.Hash(States.Format('{{}}/{name}', $.id), '{algorithm}')" for name in names}
    definition = {"StartAt": "P", "States": {"P": {"Type": "Pass", "Parameters": parameters, "End": True}}}
    done = run(definition, {"id": EXECUTION})
    assert done["status"] == "SUCCEEDED", done
    python = algorithm.replace("-", "").lower()
    assert done["output"] == {name: hashlib.new(python, f"{EXECUTION}/{name}".encode()).hexdigest() for name in names}
