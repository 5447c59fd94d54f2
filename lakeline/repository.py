"""Lakeline's repository, found one way and in this one place.

Some of what Lakeline reads is not part of the package but of the repository it is developed in: the CDK
app (``stacks/``, ``app.py``, ``cdk.json``) the local deployment synthesizes, ``lambdas/`` and the stages it
bundles as the functions' code, ``athena_queries/`` (the queries the stacks upload and the lineage queries)
and ``examples/demo/``. A clone installed with ``pip install -e .`` (``make install``) has them beside the
``lakeline`` package; an installed wheel does not, and whatever needs them says so (``in_repository``).
What ships with the package (the ASL interpreter's driver, the lineage page's assets, Spark's logging
configuration) is package data instead, read beside the module that owns it.
"""

from __future__ import annotations

from pathlib import Path

from lakeline.errors import LakelineError

REPOSITORY = Path(__file__).resolve().parent.parent
"""The folder that holds the ``lakeline`` package: the repository in a clone, site-packages in an installed
wheel (where ``in_repository`` finds nothing), the function's code folder in Lambda (which reads none of it)."""


class RepositoryMissing(LakelineError):
    """What a command needs from Lakeline's repository is not beside the installed package."""


def in_repository(*parts: str, needed_by: str) -> Path:
    """``parts`` under the repository, which must be there: ``needed_by`` names what reads it, for the error."""
    path = REPOSITORY.joinpath(*parts)
    if not path.exists():
        raise RepositoryMissing(
            f"{needed_by} reads {'/'.join(parts)} from Lakeline's repository, and {REPOSITORY} has none: run from a "
            "clone of the repository installed with `pip install -e .` (`make install` does it)"
        )
    return path
