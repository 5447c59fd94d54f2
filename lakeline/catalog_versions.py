"""Old Glue table versions pruned (#40). Every publish of an unpartitioned table points the table at its new
version (Athena's ``ALTER TABLE ... SET LOCATION``, a Glue ``UpdateTable``), and Glue archives the definition it
replaces as a table version, kept until deleted, against a quota of about 100,000 versions per table: a table
published every 30 minutes reaches it in under six years, and then no publish succeeds. After each such publish the
post-update keeps the newest ``VERSIONS_KEPT`` (the current one always) and deletes older ones, at most
``DELETED_PER_PRUNE`` at a time, oldest first (a table with a long history is brought down over a few publishes).
A rollback to an earlier definition is a rollback to its location, whose files the sweep keeps only for the grace
period: the versions kept span the publishes of that period at a few an hour."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_boto3_glue import GlueClient

VERSIONS_KEPT = 10
DELETED_PER_PRUNE = 100


class GlueTableVersions:
    """A table's versions in the Glue Data Catalog (``glue:GetTable``, ``GetTableVersions``, ``DeleteTableVersion``)."""

    def __init__(self, glue: GlueClient, *, keep: int = VERSIONS_KEPT, most: int = DELETED_PER_PRUNE) -> None:
        if keep < 1 or most < 1:
            raise ValueError(f"keep ({keep}) and most ({most}) must be at least 1: the current version stays")
        self._glue, self.keep, self.most = glue, keep, most

    def prune(self, database: str, table: str) -> list[str]:
        """Delete the versions of ``database.table`` older than the newest ``keep``; the ids deleted, oldest first."""
        current = self._glue.get_table(DatabaseName=database, Name=table)["Table"].get("VersionId")
        pages = self._glue.get_paginator("get_table_versions").paginate(DatabaseName=database, TableName=table)
        found = sorted({int(v["VersionId"]) for page in pages for v in page["TableVersions"]}, reverse=True)
        old = sorted(version for version in found[self.keep :] if str(version) != current)[: self.most]
        for version in old:
            # One call each: moto serves no BatchDeleteTableVersion, and a publish adds one version at a time.
            self._glue.delete_table_version(DatabaseName=database, TableName=table, VersionId=str(version))
        return [str(version) for version in old]
