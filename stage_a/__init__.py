"""Stage A: raw objects into stage tables with CTAS-simulated inserts."""
