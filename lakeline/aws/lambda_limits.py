"""Lambda's bound on a function's environment, measured one way by the synth check (``stacks.environment_bound``)
and by the local deployment's Lambda (``lakeline.runtimes.deployed.local_aws.moto_fixes``), which refuses what AWS
refuses."""

from __future__ import annotations

import json
from collections.abc import Mapping

ENVIRONMENT_LIMIT_BYTES = 4096
"""Lambda's limit on a function's environment variables, all together (4 KB). AWS measures them as one JSON
object (its refusal quotes the "String measured"), so names, values and the JSON around them all count."""


def environment_bytes(variables: Mapping[str, str]) -> int:
    """The size Lambda measures of ``variables``: their compact JSON object, in UTF-8 bytes."""
    return len(json.dumps(dict(variables), separators=(",", ":"), ensure_ascii=False).encode())


def biggest_variables(sizes: Mapping[str, int], count: int = 3) -> str:
    """``NAME (n bytes)`` of the ``count`` largest of ``sizes`` (a variable's name and value's bytes), largest first."""
    ranked = sorted(sizes.items(), key=lambda item: (-item[1], item[0]))[:count]
    return ", ".join(f"{name} ({size} bytes)" for name, size in ranked)


def environment_refusal(function: str, variables: Mapping[str, str]) -> str | None:
    """AWS's refusal of ``variables`` as ``function``'s environment, or ``None`` when they fit."""
    size = environment_bytes(variables)
    if size <= ENVIRONMENT_LIMIT_BYTES:
        return None
    sizes = {name: len(name.encode()) + len(value.encode()) for name, value in variables.items()}
    return (
        f"Lambda was unable to configure the environment variables of {function}: they measure {size} bytes, "
        f"over the {ENVIRONMENT_LIMIT_BYTES}-byte (4 KB) limit; the biggest: {biggest_variables(sizes)}"
    )
