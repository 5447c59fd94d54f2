"""Lambda: lineage requests from the pipeline into the lineage queue."""
