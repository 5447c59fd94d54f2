"""A local workspace: one folder per zone, the Spark metastore, and the settings that point at them.

<workspace>/raw/<team>/<dataset>/<table>/[k=v/...]<file>   arrivals (stands in for the raw bucket)
<workspace>/stage/...                                      stage tables
<workspace>/analytics/...                                  stage B targets
<workspace>/metastore/, warehouse/                         embedded Spark's catalog
<workspace>/state/                                         pipeline state, where the workspace is; logs
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakeline import logs
from lakeline.errors import validated
from lakeline.settings import PipelineSettings, TableSettings
from lakeline.storage import local_root


@dataclass(frozen=True)
class Workspace:
    root: Path
    raw: Path | None = None

    @classmethod
    def at(cls, root: Path, raw: Path | None = None) -> Workspace:
        """The workspace at ``root``; arrivals come from ``raw`` (default ``<root>/raw``)."""
        workspace = cls(root.resolve(), raw.resolve() if raw else None)
        for zone in (workspace.raw_dir, workspace.stage_dir, workspace.analytics_dir):
            zone.mkdir(parents=True, exist_ok=True)
        logs.to_workspace(workspace.root)  # the command's log lines are kept here (if it keeps them)
        return workspace

    @property
    def raw_dir(self) -> Path:
        return self.raw or self.root / "raw"

    @property
    def stage_dir(self) -> Path:
        return self.root / "stage"

    @property
    def analytics_dir(self) -> Path:
        return self.root / "analytics"

    @property
    def pipeline_state_file(self) -> Path:
        """The local pipeline-state table between runs (``LocalCloud.save_pipeline_state``)."""
        return self.root / "state" / "pipeline-state.json"

    def settings(
        self,
        *,
        environment: str | None = None,
        default_table: TableSettings | None = None,
        tables: dict[str, TableSettings] | None = None,
    ) -> PipelineSettings:
        # Validated as input: ``environment`` comes from the command line or the project file.
        return validated(
            PipelineSettings,
            {
                "raw_root": local_root(self.raw_dir),
                "stage_root": local_root(self.stage_dir),
                "analytics_root": local_root(self.analytics_dir),
                "environment": environment,
                "default_table": default_table or TableSettings(),
                "tables": tables or {},
            },
            "settings",
        )


def write_json(path: Path, value: Any, *, sort_keys: bool = False) -> None:
    """Write a workspace file whole or not at all: a crash while writing leaves the one before."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_suffix(".tmp")
    staged.write_text(json.dumps(value, indent=1, sort_keys=sort_keys))
    staged.replace(path)
