"""The two runtimes of a pipeline on one machine: deployed and embedded."""
