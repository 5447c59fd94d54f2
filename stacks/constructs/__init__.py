"""Constructs the stacks are composed of."""
