"""What the reliability tests and the benchmarks share, and neither owns: hostile inputs
(``hostile``), a moto-backed stage A cloud with fault injection and queue draining (``faults``), and
the raw objects an arrival's router reads at the door (``raw_objects``). Test and benchmark code only:
nothing under ``lakeline/``, ``lambdas/`` or ``stage_*`` imports it."""
