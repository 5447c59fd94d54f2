"""Day-2 commands: what the pipeline holds, what waits and what failed."""
