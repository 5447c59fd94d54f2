"""Which AWS API calls each deployed function's code makes, recorded while the handler tests run them.

Every botocore call passes ``BaseClient._make_api_call``; the recorder wraps it for the test session and
notes the call under the Lambda handler package whose code made it (the nearest frame in
``lambdas/<name>/``; a call made outside any handler, by a test's own setup, is not a function's). The
infrastructure tier then checks each call against the synthesized policy of that function's role
(``tests/infrastructure/test_grants.py``): a call the code makes and the role is not granted fails a test,
not a deployment.

``iam_actions`` says which IAM actions authorize an API operation: mostly ``<prefix>:<Operation>``, the
documented exceptions (S3's listing and head calls, SQS and DynamoDB batches and transactions), and the
KMS actions a call on an encrypted bucket or queue asks of the caller.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.client import BaseClient

LAMBDAS = Path(__file__).resolve().parents[1] / "lambdas"

# IAM action prefixes where they differ from botocore's signing name.
_PREFIX = {"monitoring": "cloudwatch", "email": "ses"}

# Operations authorized by other actions than their own name (the Service Authorization Reference).
_ACTIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("s3", "ListObjectsV2"): ("s3:ListBucket",),
    ("s3", "ListObjects"): ("s3:ListBucket",),
    ("s3", "ListObjectVersions"): ("s3:ListBucketVersions",),
    ("s3", "HeadObject"): ("s3:GetObject",),
    ("s3", "HeadBucket"): ("s3:ListBucket",),
    ("s3", "CopyObject"): ("s3:GetObject", "s3:PutObject"),
    ("s3", "DeleteObjects"): ("s3:DeleteObject",),
    ("s3", "CreateMultipartUpload"): ("s3:PutObject",),
    ("s3", "UploadPart"): ("s3:PutObject",),
    ("s3", "CompleteMultipartUpload"): ("s3:PutObject",),
    ("s3", "AbortMultipartUpload"): ("s3:AbortMultipartUpload",),
    ("sqs", "SendMessageBatch"): ("sqs:SendMessage",),
    ("sqs", "DeleteMessageBatch"): ("sqs:DeleteMessage",),
    ("sqs", "ChangeMessageVisibilityBatch"): ("sqs:ChangeMessageVisibility",),
    # A transaction needs the action of each kind of item it holds; Lakeline's hold puts, updates,
    # deletes and condition checks, so all four are asked of the role.
    ("dynamodb", "TransactWriteItems"): (
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:ConditionCheckItem",
    ),
    ("dynamodb", "TransactGetItems"): ("dynamodb:GetItem",),
}


# What a call on Lakeline's encrypted buckets and queues also asks of the caller's role: they are
# encrypted with the data key (SSE-KMS, SQS with a customer key), which AWS uses as the caller.
_IMPLIED_KMS: dict[str, tuple[str, ...]] = {
    "s3:PutObject": ("kms:GenerateDataKey",),
    "s3:GetObject": ("kms:Decrypt",),
    "sqs:SendMessage": ("kms:GenerateDataKey",),
    "sqs:ReceiveMessage": ("kms:Decrypt",),
}


def iam_actions(signing_name: str, operation: str) -> tuple[str, ...]:
    prefix = _PREFIX.get(signing_name, signing_name)
    actions = _ACTIONS.get((prefix, operation), (f"{prefix}:{operation}",))
    return tuple(dict.fromkeys([*actions, *(kms for action in actions for kms in _IMPLIED_KMS.get(action, ()))]))


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
