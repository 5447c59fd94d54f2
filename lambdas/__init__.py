"""Thin Lambda handlers; the logic lives in stage_a/, stage_b/ and lakeline/."""
