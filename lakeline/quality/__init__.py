"""Quality gates (#41), the foundation: checks in a subset of Glue Data Quality's DQDL, each ``block`` or
``warn``, compiled to SQL over a version and run through any ``Engine``. Not yet run by the pipeline.

``rules`` is the model, ``dqdl`` reads one rule, ``checks`` is the declared list (pydantic), ``sql``
compiles a rule for Athena and Spark, ``evaluate`` runs checks and gives the verdict. See docs/quality.md.
"""

from lakeline.quality.checks import Check, parse_checks
from lakeline.quality.dqdl import parse_rule
from lakeline.quality.evaluate import CheckResult, QualityReport, evaluate
from lakeline.quality.sql import QualityRuleError, TableRef, compile_rule

__all__ = [
    "Check",
    "CheckResult",
    "QualityReport",
    "QualityRuleError",
    "TableRef",
    "compile_rule",
    "evaluate",
    "parse_checks",
    "parse_rule",
]
