"""Which AWS API calls each deployed function's code makes, recorded while the handler tests run them.

Every botocore call passes ``BaseClient._make_api_call``; the recorder wraps it for the test session and
notes the call under the Lambda handler package whose code made it (the nearest frame in
``lambdas/<name>/``; a call made outside any handler, by a test's own setup, is not a function's). The
infrastructure tier then checks each call against the synthesized policy of that function's role
(``tests/infrastructure/test_grants.py``): a call the code makes and the role is not granted fails a test,
not a deployment.

``iam_actions`` (``lakeline.aws.actions``, which the rehearsal's IAM enforcement uses too) says which IAM
actions authorize an API operation.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.client import BaseClient

from lakeline.aws.actions import iam_actions

LAMBDAS = Path(__file__).resolve().parents[1] / "lambdas"


@dataclass(frozen=True, order=True)
class ApiCall:
    function: str
    """The handler package (``lambdas/<function>/``) whose code made the call."""
    service: str
    operation: str

    @property
    def actions(self) -> tuple[str, ...]:
        return iam_actions(self.service, self.operation)


def _calling_function() -> str | None:
    frame = sys._getframe(2)
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        if path.is_relative_to(LAMBDAS) and len(path.relative_to(LAMBDAS).parts) > 1:
            return path.relative_to(LAMBDAS).parts[0]
        frame = frame.f_back  # type: ignore[assignment]
    return None


@dataclass
class CallRecorder:
    calls: set[ApiCall] = field(default_factory=set)
    handler_tests_ran: bool = False

    @contextmanager
    def installed(self) -> Iterator[CallRecorder]:
        original = BaseClient._make_api_call  # type: ignore[attr-defined]  # botocore's stubs omit it

        def recording(client: BaseClient, operation_name: str, api_params: Any) -> Any:
            function = _calling_function()
            if function is not None:
                service = client.meta.service_model.signing_name
                self.calls.add(ApiCall(function, service, operation_name))
            return original(client, operation_name, api_params)

        BaseClient._make_api_call = recording  # type: ignore[attr-defined]
        try:
            yield self
        finally:
            BaseClient._make_api_call = original  # type: ignore[attr-defined]


RECORDER = CallRecorder()
"""The test session's recorder (installed by ``tests/conftest.py``)."""
