"""The Glue scanner: extract the Glue Data Catalog and Glue jobs, and derive lineage from their scripts."""
