"""dependencies-by-table: the ``dependencies`` table stream keeps ``dependencies-by-table`` in step."""
