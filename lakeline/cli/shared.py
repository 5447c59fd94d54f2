"""What several ``lakeline`` commands share: the consoles they print on, the options they take (one
definition each, so the same option reads the same in every command's ``--help``), and what those
options are turned into: the ``--config`` project, the pipeline settings, the workspace."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from lakeline import logs
from lakeline.errors import ConfigError, LakelineError, validated
from lakeline.settings import PipelineSettings

if TYPE_CHECKING:
    from lakeline.project.config import ProjectConfig
    from lakeline.project.workspace import Workspace

# Where the commands print: notes and spinners on stderr, progress and results on stdout.
err_console = Console(stderr=True)


def progress_console() -> Console:
    """The console of commands that report progress line by line: a time on each line but not the
    source line that printed it; in a pipe or a log, long lines stay whole instead of wrapping mid-value."""
    console = Console(log_path=False)
    console.soft_wrap = not console.is_terminal
    return console


def moved(message: str) -> None:
    """A workspace opened where it was not made (``lakeline.project.relocation``) says so once."""
    err_console.print(escape(message), soft_wrap=True)


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


# The options several commands take: one definition each, so they read the same in every --help.
BucketCount = Annotated[int | None, typer.Option(help="files per partition (default from config, else 1)")]
TableFormatOption = Annotated[str | None, typer.Option("--format", help="PARQUET, ORC, JSON or TEXTFILE")]
CompressionOption = Annotated[str | None, typer.Option(help="e.g. SNAPPY, GZIP, ZSTD, NONE")]
EnvironmentOption = Annotated[str | None, typer.Option(help="database name suffix, e.g. dev")]
RegionOption = Annotated[str | None, typer.Option(help="AWS region (default: from the AWS configuration)")]
EndpointOption = Annotated[
    str | None, typer.Option("--endpoint-url", help="AWS endpoint URL, e.g. a local DynamoDB or moto server")
]
ConfigOption = Annotated[
    Path | None, typer.Option(help="the project's lakeline.yml (or a file of pipeline settings)", show_default=False)
]
WorkspaceOption = Annotated[
    Path | None,
    typer.Option(help="local workspace folder [default: the --config project's, else .lakeline]", show_default=False),
]
# --config of the commands that run a local project (run, watch): a lakeline.yml, not a settings file
ProjectOption = Annotated[Path, typer.Option("--config", help="lakeline.yml of the local project")]
StackOption = Annotated[str | None, typer.Option(help="a deployed pipeline stack, e.g. Lakeline-dev-Pipeline")]
# --deployed/--embedded of the commands that read what a project's runs left (status, dlq, sql, reprocess)
RuntimeOption = Annotated[
    bool | None,
    typer.Option(
        "--deployed/--embedded",
        help="the project's local deployment (what `lakeline run` stands up and keeps) or the embedded runtime's "
        "workspace (`lakeline run --embedded`) [default: the one the workspace's last run used]",
        show_default=False,
    ),
]


def runtime_file(root: Path) -> Path:
    return root / "state" / "runtime"


def project_record(root: Path) -> Path:
    return root / "state" / "project.json"


def note_runtime(root: Path, deployed: bool, config: Path) -> None:
    """Say which runtime ``lakeline run`` or ``watch`` used last on the workspace ``root`` (also when it found
    nothing new), for the commands that follow it (``reads_deployment``), and which project file ``config``
    it ran, for the commands given only ``--workspace`` (``project_file``)."""
    runtime_file(root).parent.mkdir(parents=True, exist_ok=True)
    runtime_file(root).write_text("deployed\n" if deployed else "embedded\n")
    where = config.resolve()
    # Both: the project folder moved or copied whole keeps its relative path, a workspace kept apart its absolute one.
    record = {"config": str(where), "from_workspace": os.path.relpath(where, root)}
    project_record(root).write_text(json.dumps(record, indent=1) + "\n")


def recorded_project(root: Path) -> Path | None:
    """The project file the last ``run`` or ``watch`` on the workspace ``root`` ran (``note_runtime``), if it
    is still there and still names this workspace; ``None`` if the workspace records none."""
    from lakeline.project.config import ProjectConfig

    try:
        record = json.loads(project_record(root).read_text())
    except (OSError, ValueError):
        return None
    candidates = [root / str(record.get("from_workspace", "")), Path(str(record.get("config", "")))]
    for candidate in candidates:
        if candidate.is_file():
            try:
                if ProjectConfig.load(candidate).workspace == root.resolve():
                    return candidate.resolve()
            except ConfigError:
                continue
    raise ConfigError(
        f"the workspace {root} was made for the project {record.get('config')}, which is not there (or names another "
        "workspace now): pass the project's lakeline.yml with --config"
    )


def project_file(config: Path | None, workspace: Path | None) -> Path:
    """The project file (lakeline.yml) a command reads: ``--config``; else, given ``--workspace``, the one the
    workspace's last ``run`` ran (``recorded_project``); else ``lakeline.yml`` here."""
    if config is not None:
        return config
    if workspace is not None:
        found = recorded_project(workspace.resolve())
        if found is None:
            raise ConfigError(
                f"the workspace {workspace.resolve()} does not record its project (no `lakeline run` of this version "
                "ran on it): pass the project's lakeline.yml with --config"
            )
        return found
    here = Path("lakeline.yml")
    if not here.is_file():
        raise ConfigError(
            f"no lakeline.yml in {Path.cwd()}: run this in the project's folder, or pass --config (the project's "
            "lakeline.yml) or --workspace (its workspace)"
        )
    return here


def reads_deployment(choice: bool | None, root: Path) -> bool:
    """``--deployed`` or ``--embedded`` as given; else the runtime ``lakeline run`` or ``watch`` used last on
    the workspace ``root`` (``note_runtime``); for a workspace of an earlier version, which says nothing, the
    local deployment if its kept state is newer than the embedded runtime's ``summary.json`` (or there is no
    such summary), the embedded runtime if only it ran or nothing did."""
    from lakeline.runtimes.deployed.local_aws.kept_state import kept_at

    if choice is not None:
        return choice
    try:
        noted = runtime_file(root).read_text().strip()
    except OSError:
        noted = ""
    if noted in ("deployed", "embedded"):
        return noted == "deployed"
    deployed, embedded = kept_at(root / "deployed" / "state"), root / "summary.json"
    if deployed is None:
        return False
    return not embedded.is_file() or deployed >= embedded.stat().st_mtime


def table_settings(bucket_count: int | None, table_format: str | None, compression: str | None) -> dict[str, Any]:
    """The table settings ``--bucket-count``, ``--format`` and ``--compression`` give, if any."""
    overrides: dict[str, Any] = {}
    if bucket_count is not None:
        overrides["bucket_count"] = bucket_count
    if table_format is not None:
        overrides["format"] = table_format.upper()
    if compression is not None:
        overrides["compression"] = compression
    return overrides


def project_of(config: Path | None) -> ProjectConfig | None:
    """The project ``config`` names, if it is a lakeline.yml (what ``lakeline run`` reads) rather than a
    pipeline settings file (``pipeline:``, or ``raw_root``/``stage_root`` at the top)."""
    import yaml

    from lakeline.project.config import ProjectConfig

    if config is None:
        return None
    try:
        data = yaml.safe_load(config.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"cannot read {config}: {error}") from error
    if isinstance(data, dict) and data.keys() & {"pipeline", "raw_root", "stage_root"}:
        return None
    return ProjectConfig.load(config)


def settings_of(
    config: Path | None, project: ProjectConfig | None, defaults: dict[str, Any], table_overrides: dict[str, Any]
) -> PipelineSettings:
    """``defaults`` overlaid with the ``--config`` file: its ``project`` (``project_of``), or else its
    pipeline settings; then the table options given on the command line."""
    if project is not None:
        base: dict[str, Any] = {
            "environment": project.environment,
            "default_table": project.default_table.model_dump(),
            "tables": {name: table.model_dump() for name, table in project.tables_settings.items()},
        }
    else:
        base = PipelineSettings.from_yaml(config).model_dump() if config else {}
    merged = {**defaults, **{k: v for k, v in base.items() if v not in (None, "", {})}}
    if defaults.get("environment"):  # --environment, given on the command line, wins over the file
        merged["environment"] = defaults["environment"]
    if table_overrides:
        merged["default_table"] = {**merged.get("default_table", {}), **table_overrides}
    return validated(PipelineSettings, merged, "settings")


def workspace_of(project: ProjectConfig | None, workspace: Path | None) -> Workspace:
    """``--workspace``, else the ``--config`` project's workspace (and raw folder), else ``.lakeline``."""
    from lakeline.project.workspace import Workspace

    if workspace is None and project is not None:
        return Workspace.at(project.workspace, project.raw)
    return Workspace.at(workspace or Path(".lakeline"))


def workspace_root(config: Path | None, workspace: Path | None, project: ProjectConfig | None = None) -> Path:
    """The workspace a command reads: ``--workspace``; else the ``--config`` project's; else ``.lakeline``."""
    if workspace is not None:
        return workspace.resolve()
    project = project or project_of(config)
    return (project.workspace if project else Path(".lakeline")).resolve()


def existing_workspace(config: Path | None, workspace: Path | None) -> tuple[Path, Callable[[str], frozenset[str]]]:
    """The workspace folder (which must exist: status and dlq create nothing) and each target's sources, from
    the project's dependency items if ``--config`` names them."""
    from lakeline.dependencies.files import load_items
    from lakeline.project.config import ProjectConfig

    project = project_of(config)
    root = workspace_root(config, workspace, project)
    if not (root / "state").is_dir() and not (root / "summary.json").exists():
        raise LakelineError(f"no Lakeline workspace at {root}: run `lakeline run` first, or name it with --workspace")
    logs.to_workspace(root)
    if project is None:
        with suppress(ConfigError):  # without it, the targets' sources are only not known
            recorded = recorded_project(root)
            project = ProjectConfig.load(recorded) if recorded else None
    sources = (
        {item.dataset: frozenset(item.source_tables) for item in load_items(project.dependencies)} if project else {}
    )
    return root, lambda target: sources.get(target, frozenset())
