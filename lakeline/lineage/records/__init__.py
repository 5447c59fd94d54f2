"""The seed's lineage records: the model, the writer and loader, the DynamoDB table, traces and the S3 archive."""
