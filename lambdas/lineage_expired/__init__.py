"""Lambda: archive lineage items that the table's TTL removed before they were traced."""
