"""Lambda: trace roots into the lineage archive."""
