"""OpenLineage: events, run life cycle, dataset naming, configuration and emitting, the events' archive table."""
