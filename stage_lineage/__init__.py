"""Stage lineage glue: the lineage records and OpenLineage events of stage A and stage B runs, built
from their plans (above the stages, beneath the handlers and the local runtime)."""
