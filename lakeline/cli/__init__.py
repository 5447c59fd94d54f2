"""The ``lakeline`` command, the top layer: ``main`` (the app: run, watch, sql, status, reprocess, dlq,
stage-a, stage-b, demo), ``deps``, ``glue``, ``lineage`` (with ``lineage_records`` and
``lineage_columns``). Every command fails through ``lakeline.console.fail`` with one exit-code convention."""

from lakeline.cli.main import ResultFormat, app, print_result

__all__ = ["ResultFormat", "app", "print_result"]
