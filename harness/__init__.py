"""What the reliability tests and the benchmarks share, and neither owns: hostile inputs
(``hostile``), a moto-backed stage A cloud with fault injection and queue draining (``faults``), the raw
objects an arrival's router reads at the door (``raw_objects``), and a small project of the shop's shape
(``shop_project``). Test and benchmark code only: nothing under ``lakeline/``, ``lambdas/`` or ``stage_*``
imports it."""
