"""Table schemas from a catalog file in the aws-cli ``glue get-tables`` shape.

Accepts ``{"TableList": [...]}`` (one database's output) or a list of such documents, each table
carrying ``DatabaseName``, ``Name``, ``StorageDescriptor.Columns`` and ``PartitionKeys``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lakeline.engines.base import Column, TableNotFound, TableSchema
from lakeline.errors import InvalidInputError


def _tables(document: Any) -> list[dict[str, Any]]:
    if isinstance(document, list):
        return [table for part in document for table in _tables(part)]
    if isinstance(document, dict) and isinstance(document.get("TableList"), list):
        return list(document["TableList"])
    if isinstance(document, dict) and "Table" in document:
        return [document["Table"]]
    raise InvalidInputError("catalog JSON must be the output of 'aws glue get-tables' ({\"TableList\": [...]})")


class CatalogFile:
    def __init__(self, schemas: dict[tuple[str, str], TableSchema], catalog_ids: frozenset[str] = frozenset()) -> None:
        self._schemas = schemas
        self.catalog_ids = catalog_ids
        """The ``CatalogId`` (the account) of the dump's tables: with the region, their Glue catalog."""

    @classmethod
    def load(cls, path: Path) -> CatalogFile:
        try:
            document = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise InvalidInputError(f"cannot read catalog {path}: {error}") from error
        schemas: dict[tuple[str, str], TableSchema] = {}
        catalog_ids: set[str] = set()
        for entry in _tables(document):
            if isinstance(entry, dict) and entry.get("CatalogId"):
                catalog_ids.add(str(entry["CatalogId"]))
            try:
                database = str(entry["DatabaseName"]).lower()
                name = str(entry["Name"]).lower()
                descriptor = entry.get("StorageDescriptor", {})
                columns = tuple(
                    Column(c["Name"].lower(), c.get("Type", "string")) for c in descriptor.get("Columns", [])
                )
                partitions = tuple(
                    Column(c["Name"].lower(), c.get("Type", "string")) for c in entry.get("PartitionKeys", [])
                )
            except (KeyError, TypeError, AttributeError) as error:
                raise InvalidInputError(f"catalog {path}: table entry {entry!r:.80} is missing {error}") from error
            schemas[(database, name)] = TableSchema(database, name, columns, partitions, descriptor.get("Location"))
        return cls(schemas, frozenset(catalog_ids))

    def describe_table(self, database: str, table: str) -> TableSchema:
        try:
            return self._schemas[(database, table)]
        except KeyError:
            raise TableNotFound(database, table) from None

    def tables(self) -> list[TableSchema]:
        return list(self._schemas.values())
