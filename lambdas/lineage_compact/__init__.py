"""Lambda: the hourly compaction that folds the staged lineage traces into the archive's few objects per day."""
