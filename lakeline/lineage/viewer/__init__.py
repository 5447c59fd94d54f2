"""The lineage picture: one offline HTML page of datasets, jobs and columns."""
