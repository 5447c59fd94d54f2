"""The quality gates' CloudWatch metrics (#41): what the functions emit and what the stacks alarm on, named once.

Both engines' runs end in the same functions (the stages' failure and post-update functions), so the metrics are
emitted there, whichever engine ran the checks: ``QualityBlockedVersions`` (1 for each version a ``block`` rule kept
from being published) by the failure functions, ``QualityWarnings`` (the failed ``warn`` rules of each published
version) by the post-update functions. They carry one dimension set whatever the function (``DIMENSIONS``), so one
alarm (``stacks.constructs.alarms``) and one graph see both stages.
"""

from __future__ import annotations

from typing import Final

from lakeline.names import METRICS_NAMESPACE

__all__ = ["BLOCKED_VERSIONS", "DIMENSIONS", "METRICS_NAMESPACE", "WARNINGS"]

BLOCKED_VERSIONS: Final = "QualityBlockedVersions"
"""Versions a failed ``block`` rule kept from being published (one per failed run)."""
WARNINGS: Final = "QualityWarnings"
"""Failed ``warn`` rules of the versions published (each published anyway)."""
DIMENSIONS: Final = {"service": "quality-gates"}
"""The dimensions both stages' functions emit them with (not each function's own ``service``)."""
