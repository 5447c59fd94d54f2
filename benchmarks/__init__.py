"""Reproducible measurements printing ratios against a baseline run in the same process."""
