"""Stage B: templated SQL steps, chained by dependencies."""
