"""A project's configuration (``lakeline.yml``) and what both runtimes read of its folders: the raw files
that are arrivals, and a snapshot of the inputs (``lakeline.project.settled``).

A ``lakeline.yml`` names the folders and files; paths are relative to the file's folder:

    workspace: .lakeline              # metastore, stage and analytics data, lineage, state
    raw: raw                          # arrivals: raw/<team>/<dataset>/<table>/[k=v/]<file>
    environment: dev                  # database suffix: <team>_<dataset>_dev
    dependencies: [dependencies]      # dependency item JSON files or folders
    tables: [tables.sql]              # Athena DDL for the stage B targets ($analytics_root, $workspace)
    queries: athena_queries           # <team>/*.sql files named by steps' sql_file
    default_table: {format: PARQUET, bucket_count: 1}
    tables_settings:
      engineering_sales_dev.orders: {bucketed_by: [order_id], bucket_count: 2}
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from lakeline.project.settled import Settled, file_digest, inputs_digest
from lakeline.repository import REPOSITORY
from lakeline.settings import TableSettings, read_yaml_model
from stage_a.keys import InvalidKey, parse_raw_key

# A project that names no queries folder reads the repository's (read when a step names a file).
DEFAULT_QUERIES = REPOSITORY / "athena_queries"


class ProjectConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workspace: Path = Path(".lakeline")
    raw: Path | None = None
    environment: str | None = None
    dependencies: list[Path] = Field(default_factory=list)
    tables: list[Path] = Field(default_factory=list)
    queries: Path = DEFAULT_QUERIES
    default_table: TableSettings = TableSettings()
    tables_settings: dict[str, TableSettings] = Field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> ProjectConfig:
        return read_yaml_model(cls, path).relative_to(path.parent)

    def relative_to(self, base: Path) -> ProjectConfig:
        def resolve(path: Path) -> Path:
            return path if path.is_absolute() else (base / path).resolve()

        return self.model_copy(
            update={
                "workspace": resolve(self.workspace),
                "raw": resolve(self.raw) if self.raw else None,
                "dependencies": [resolve(p) for p in self.dependencies],
                "tables": [resolve(p) for p in self.tables],
                "queries": resolve(self.queries),
            }
        )


def project_snapshot(config: ProjectConfig, raw_dir: Path, keys: list[str], *, also: Sequence[Path] = ()) -> Settled:
    """The project's inputs (with the files or folders ``also``) and the raw files ``keys`` as they are now
    (``lakeline.project.settled``)."""
    inputs = inputs_digest(config.model_dump_json(), [*config.dependencies, *config.tables, config.queries, *also])
    return Settled(inputs, {key: file_digest(raw_dir / key) for key in keys})


def raw_keys(raw_dir: Path, console: Console) -> list[str]:
    """Every file under ``raw_dir`` that is an arrival (others are reported and left alone)."""
    keys = []
    for path in sorted(raw_dir.rglob("*")):
        if not path.is_file() or any(part.startswith((".", "_")) for part in path.parts):
            continue
        key = path.relative_to(raw_dir).as_posix()
        try:
            parse_raw_key(key)
        except InvalidKey as error:
            console.print(f"[yellow]skipped[/] {error}")
            continue
        keys.append(key)
    return keys
