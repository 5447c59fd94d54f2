"""Column lineage: from SQL (sqlglot) and from Spark's analyzed plans, as OpenLineage column facets and a graph."""
