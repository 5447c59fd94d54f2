"""The one home of Lakeline's AWS plumbing, beneath every other layer.

- ``clients``: boto3 clients, all made with one botocore retry configuration;
- ``retry``: the one backoff (exponential, full jitter) for what botocore does not retry: a call that
  partly fails (unprocessed items, refused batch entries) or an error code a caller knows is passing;
- ``sqs``: the one batch sender (10 entries and 256 KiB a call, sender faults named) and dead-lettering;
- ``sqs_batches``: Powertools partial batch responses for handlers that write a batch at once;
- ``stepfunctions``: starting an execution exactly once per name.

Nothing here knows about stages, dependencies or lineage.
"""
