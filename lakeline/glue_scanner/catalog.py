"""The Glue Data Catalog of one connection folder, from its aws-cli-shaped JSON files.

Tables come from ``get-tables`` documents (``{"TableList": [...]}``, read with ``CatalogFile``),
databases from ``get-databases`` (``{"DatabaseList": [...]}``), Glue Connections from
``get-connections`` (``{"ConnectionList": [...]}``, extracted without passwords). Resource links are followed to the
table they point at (a link table's ``TargetTable``, or every table of a linked database's
``TargetDatabase``), so a script reading a link reads the real table. A table's S3 location names it:
a script reading or writing exactly that location is reading or writing the table.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakeline.catalog_json import CatalogFile
from lakeline.engines.base import TableNotFound, TableSchema
from lakeline.errors import InvalidInputError

_MAX_LINKS = 8


def canonical_location(location: str) -> str:
    """``s3a://b/p/`` and ``s3://b/p`` are the same place."""
    text = location.strip()
    for scheme in ("s3a://", "s3n://"):
        if text.startswith(scheme):
            text = "s3://" + text[len(scheme) :]
    return text.rstrip("/")


@dataclass
class GlueCatalog:
    files: list[CatalogFile] = field(default_factory=list)
    tables: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """Raw table entries by lower-cased (database, name)."""
    databases: dict[str, dict[str, Any]] = field(default_factory=dict)
    connections: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Glue Connections by name, from ``get-connections`` output (``{"ConnectionList": [...]}``)."""

    @classmethod
    def from_documents(cls, documents: Iterable[tuple[Path, Any]]) -> GlueCatalog:
        catalog = cls()
        for path, document in documents:
            catalog.add(path, document)
        return catalog

    def add(self, path: Path, document: Any) -> None:
        if isinstance(document, dict) and isinstance(document.get("DatabaseList"), list):
            for database in document["DatabaseList"]:
                if not isinstance(database, dict) or "Name" not in database:
                    raise InvalidInputError(f"{path}: a database entry has no Name")
                self.databases[str(database["Name"]).lower()] = database
            return
        if isinstance(document, dict) and isinstance(document.get("ConnectionList"), list):
            for connection in document["ConnectionList"]:
                if not isinstance(connection, dict) or "Name" not in connection:
                    raise InvalidInputError(f"{path}: a connection entry has no Name")
                self.connections[str(connection["Name"])] = connection
            return
        if isinstance(document, dict) and isinstance(document.get("Database"), dict):
            self.add(path, {"DatabaseList": [document["Database"]]})
            return
        self.files.append(CatalogFile.load(path))
        entries = document.get("TableList") if isinstance(document, dict) else None
        if entries is None and isinstance(document, dict):
            entries = [document["Table"]]
        for entry in entries or []:
            self.tables[(str(entry["DatabaseName"]).lower(), str(entry["Name"]).lower())] = entry

    @property
    def catalog_ids(self) -> frozenset[str]:
        """The accounts (``CatalogId``) of the tables, as the dumps give them."""
        return frozenset(account for catalog_file in self.files for account in catalog_file.catalog_ids)

    @classmethod
    def load_files(cls, paths: Iterable[Path]) -> GlueCatalog:
        documents = []
        for path in paths:
            try:
                documents.append((path, json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, json.JSONDecodeError) as error:
                raise InvalidInputError(f"cannot read catalog file {path}: {error}") from error
        return cls.from_documents(documents)

    # Names -------------------------------------------------------------------------------------

    def resolve_link(self, database: str, table: str) -> tuple[str, str]:
        """The table a (possibly linked) name really is, lower-cased."""
        current = (database.lower(), table.lower())
        for _ in range(_MAX_LINKS):
            entry = self.tables.get(current)
            target = entry.get("TargetTable") if entry else None
            if isinstance(target, Mapping) and target.get("DatabaseName") and target.get("Name"):
                current = (str(target["DatabaseName"]).lower(), str(target["Name"]).lower())
                continue
            linked_database = self.databases.get(current[0], {}).get("TargetDatabase")
            if entry is None and isinstance(linked_database, Mapping) and linked_database.get("DatabaseName"):
                current = (str(linked_database["DatabaseName"]).lower(), current[1])
                continue
            return current
        raise InvalidInputError(f"resource links from {database}.{table} do not end (more than {_MAX_LINKS})")

    def describe_table(self, database: str, table: str) -> TableSchema:
        """The table's columns, following resource links; ``TableNotFound`` if the catalog lacks it."""
        real = self.resolve_link(database, table)
        for catalog_file in self.files:
            try:
                return catalog_file.describe_table(*real)
            except TableNotFound:
                continue
        raise TableNotFound(*real)

    def schema_or_none(self, database: str, table: str) -> TableSchema | None:
        try:
            return self.describe_table(database, table)
        except TableNotFound:
            return None

    def connection(self, name: str) -> dict[str, Any] | None:
        return self.connections.get(name)

    def table_at(self, location: str) -> tuple[str, str] | None:
        """The one table stored at ``location``, or ``None`` (none, or several: not guessed)."""
        wanted = canonical_location(location)
        found = []
        for key, entry in self.tables.items():
            if entry.get("TableType") == "VIRTUAL_VIEW":
                continue
            stored = (entry.get("StorageDescriptor") or {}).get("Location")
            if stored and canonical_location(str(stored)) == wanted:
                found.append(key)
        return found[0] if len(found) == 1 else None

    def __len__(self) -> int:
        return len(self.tables)
