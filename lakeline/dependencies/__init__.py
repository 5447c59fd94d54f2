"""Dependency items: which datasets a target needs, and how its partition dates are computed."""
