"""Which IAM actions authorize an AWS API operation: mostly ``<prefix>:<Operation>``; the documented
exceptions (S3's listing and head calls, SQS and DynamoDB batches and transactions, from the Service
Authorization Reference); and the KMS actions a call on Lakeline's encrypted buckets and queues asks of
the caller. Used by the grants check of the infrastructure tier and by the rehearsal's IAM enforcement.
"""

from __future__ import annotations

# IAM action prefixes where they differ from botocore's signing name.
ACTION_PREFIXES = {"monitoring": "cloudwatch", "email": "ses"}

# Operations authorized by other actions than their own name (the Service Authorization Reference).
ACTIONS: dict[tuple[str, str], tuple[str, ...]] = {
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
    ("lambda", "Invoke"): ("lambda:InvokeFunction",),
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
IMPLIED_KMS: dict[str, tuple[str, ...]] = {
    "s3:PutObject": ("kms:GenerateDataKey",),
    "s3:GetObject": ("kms:Decrypt",),
    "sqs:SendMessage": ("kms:GenerateDataKey",),
    "sqs:ReceiveMessage": ("kms:Decrypt",),
}


def iam_actions(signing_name: str, operation: str) -> tuple[str, ...]:
    prefix = ACTION_PREFIXES.get(signing_name, signing_name)
    actions = ACTIONS.get((prefix, operation), (f"{prefix}:{operation}",))
    return tuple(dict.fromkeys([*actions, *(kms for action in actions for kms in IMPLIED_KMS.get(action, ()))]))
