"""A Lambda context object with the attributes Powertools reads, for calling handlers in tests."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LambdaContextStub:
    function_name: str = "lakeline-test"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:lakeline-test"
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"
    function_version: str = "$LATEST"
    log_group_name: str = "/aws/lambda/lakeline-test"
    log_stream_name: str = "test"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000
