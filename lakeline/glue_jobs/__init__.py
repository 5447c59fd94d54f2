"""Scripts that run Lakeline's Spark engine as AWS Glue for Spark jobs."""
