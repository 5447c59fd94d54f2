"""Lineage: records through SQS into DynamoDB, the nightly trace archive, OpenLineage and column lineage."""
