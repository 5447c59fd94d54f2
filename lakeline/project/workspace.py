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
from lakeline.errors import LakelineError, validated
from lakeline.settings import PipelineSettings, TableSettings
from lakeline.storage import RUN_PREFIX, local_root


class WorkspaceDamaged(LakelineError):
    """A workspace file that cannot be trusted: missing beside the data it vouches for, or unreadable.
    Nothing runs on such a workspace: a run would plan against a state that is not the data's."""


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

    def published_prefixes(self) -> list[Path]:
        """The run prefixes holding data under the stage and analytics zones: what earlier runs published
        (or left); any one of them means the workspace has a history its pipeline state must describe."""
        found = []
        for zone in (self.stage_dir, self.analytics_dir):
            for prefix in zone.rglob(f"{RUN_PREFIX}*"):
                if prefix.is_dir() and any(path.is_file() for path in prefix.rglob("*")):
                    found.append(prefix)
        return sorted(found)

    def read_pipeline_state(self) -> list[dict[str, Any]]:
        """The pipeline-state items kept between runs, checked: ``WorkspaceDamaged`` (saying what to do)
        when the file is not the list of items a run writes, or is missing while earlier runs' data is
        here: the partitions' versions, what each holds and what was applied are then unknown, and a run
        would write new versions holding only its own arrivals over the published ones."""
        path = self.pipeline_state_file
        if not path.exists():
            published = self.published_prefixes()
            if published:
                raise WorkspaceDamaged(
                    f"the pipeline state {path} is missing, but {len(published)} partition versions written by "
                    f"earlier runs are in {self.root} (e.g. {published[0]}); {self._start_over()}"
                )
            return []
        try:
            items = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise WorkspaceDamaged(
                f"the pipeline state {path} cannot be read ({error}); {self._start_over()}"
            ) from None
        if not isinstance(items, list) or not all(
            isinstance(item, dict) and "target_partition" in item for item in items
        ):
            raise WorkspaceDamaged(
                f"the pipeline state {path} is not a list of pipeline-state items; {self._start_over()}"
            )
        return items

    def _start_over(self) -> str:
        """What a user can do about a damaged workspace, without losing a raw file."""
        inside = self.raw is None or self.raw.is_relative_to(self.root)
        if inside and any(path.is_file() for path in self.raw_dir.rglob("*")):
            return f"restore the file from a copy (the raw files are in {self.raw_dir}, inside this workspace)"
        return (
            f"restore the file from a copy, or move {self.root} aside and run again: every table is loaded "
            "again from the raw files"
        )

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
    try:
        staged.write_text(json.dumps(value, indent=1, sort_keys=sort_keys))
    except OSError:
        staged.unlink(missing_ok=True)  # a full disk: no half-written copy left beside the whole one
        raise
    staged.replace(path)
