"""The embedded local runtime: a workspace folder standing in for the S3 buckets and the Glue catalog."""
