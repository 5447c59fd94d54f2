"""Lambda: the nightly schedule that queues a trace for every root loaded since the last run."""
