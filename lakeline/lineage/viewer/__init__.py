"""Reading recorded lineage back for people: the column graph over stored OpenLineage events
(``column_graph``: follow a column back across jobs), the tree ``lakeline lineage tree`` prints
(``column_tree``), and one offline HTML page of datasets, jobs and columns (``html``).

It stands above ``lineage.openlineage`` (whose events it reads) and ``lineage.columns`` (the column
lineage those events carry), and nothing below imports it."""
