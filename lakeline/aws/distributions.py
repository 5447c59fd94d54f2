"""What an AWS runtime provides beside the code it runs, as distribution names: the Lambda Python runtime and
Glue both have the AWS SDK; the functions have the public Powertools layer too. The OpenLineage layer leaves
these out (``stacks.constructs.bundling``); the rehearsal lets a function or a job import only these beside
its own code (``lakeline.runtimes.deployed.local_aws.functions``, ``glue``)."""

from __future__ import annotations

AWS_SDK = ("boto3", "botocore", "s3transfer", "jmespath", "urllib3", "python-dateutil", "six")
"""The AWS SDK for Python and what it requires."""

POWERTOOLS_LAYER = ("aws-lambda-powertools", "pydantic", "pydantic-core", "annotated-types", "aws-xray-sdk", "wrapt")
"""The public Powertools layer's distributions (Powertools itself, pydantic with pydantic-core,
annotated-types, aws-xray-sdk with wrapt)."""
