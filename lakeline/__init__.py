"""Lakeline: an event-driven data lake pipeline with lineage, on Athena or Spark."""

__version__ = "0.1.0"
