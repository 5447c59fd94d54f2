"""The ``lakeline`` command, the top layer. ``main`` is the app and lists every command; each subject
has its module: ``run`` (demo, run, watch), ``sql``, ``status``, ``reprocess``, ``dlq``, ``stages``
(stage-a, stage-b), ``deps``, ``glue``, ``lineage`` (with ``lineage_records`` and ``lineage_columns``);
``shared`` holds the options several commands take and the consoles they print on. Every command fails
through ``lakeline.console.fail`` with one exit-code convention."""

from lakeline.cli.main import app
from lakeline.cli.sql import ResultFormat, print_result

__all__ = ["ResultFormat", "app", "print_result"]
