"""Lambda: the lineage queue into the lineage table."""
