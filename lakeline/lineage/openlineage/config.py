"""Where Lakeline's OpenLineage events go, configured the way every OpenLineage client is.

Sources, weakest first (the precedence openlineage-python itself uses, then explicit overrides):

1. ``OPENLINEAGE__*`` variables, nested with ``__``: ``OPENLINEAGE__TRANSPORT__TYPE=file``,
   ``OPENLINEAGE__TRANSPORT__LOG_FILE_PATH=...``; values are JSON when they parse as JSON.
2. ``openlineage.yml``: the file named by ``OPENLINEAGE_CONFIG``, else ``./openlineage.yml``, else
   ``~/.openlineage/openlineage.yml``. Its ``transport``, ``facets``, ``filters``, ``tags``, ``dataset``
   sections are openlineage-python's own.
3. ``overrides`` passed in (command-line options).

The Spark listener's settings have equivalents here, as ``OPENLINEAGE_*`` variables or top-level keys
of ``openlineage.yml``: ``namespace`` (``OPENLINEAGE_NAMESPACE``), ``parentJobNamespace`` /
``parentJobName`` / ``parentRunId`` (``OPENLINEAGE_PARENT_JOB_NAMESPACE``, ``..._NAME``,
``OPENLINEAGE_PARENT_RUN_ID``, or ``OPENLINEAGE_PARENT_ID=namespace/name/runId`` as dbt-ol reads it),
URL and API key (``OPENLINEAGE_URL``, ``OPENLINEAGE_ENDPOINT``, ``OPENLINEAGE_API_KEY``, used only when no
transport is configured otherwise), ``url.param.xyz`` (``OPENLINEAGE_URL_PARAM_XYZ``, added to the URL's
query string of the endpoint), plus ``datasetNamespace`` (``OPENLINEAGE_DATASET_NAMESPACE``) and
``glueCatalog`` (``OPENLINEAGE_GLUE_CATALOG``, ``arn:aws:glue:{region}:{account}``): see ``lineage.openlineage.naming``.

With none of it set, no transport is configured: events stay in process with the lineage records and
nothing is written or sent anywhere. ``OPENLINEAGE_DISABLED=true`` turns the configured transport off.

Nothing here reads the environment or the disk on import: the caller passes ``environ``, ``cwd`` and
``home`` (a Lambda handler passes ``os.environ`` once, tests pass a dict).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import yaml
from openlineage.client.utils import deep_merge_dicts

from lakeline.errors import ConfigError
from lakeline.lineage.openlineage.naming import (
    LOCAL_DATASET_NAMESPACE,
    DatasetNaming,
    athena_dataset_namespace,
    check_glue_catalog,
)

__all__ = ["LOCAL_DATASET_NAMESPACE", "athena_dataset_namespace"]  # where callers have always found them

DEFAULT_JOB_NAMESPACE = "lakeline"

CLIENT_SECTIONS = ("transport", "facets", "filters", "tags", "dataset")
LAKELINE_KEYS = (
    "namespace",
    "datasetNamespace",
    "glueCatalog",
    "parentJobNamespace",
    "parentJobName",
    "parentRunId",
)
DYNAMIC_PREFIX = "OPENLINEAGE__"
URL_PARAM_PREFIX = "OPENLINEAGE_URL_PARAM_"
DEFAULT_HTTP_ENDPOINT = "api/v1/lineage"


def _check_run_id(value: str, what: str) -> str:
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise ConfigError(f"{what} {value!r} is not a UUID; OpenLineage run ids are UUIDs") from None


@dataclass(frozen=True)
class RunReference:
    """A run of another job: the parent (the pipeline execution) or the root of a run tree."""

    namespace: str
    name: str
    run_id: str

    def __post_init__(self) -> None:
        if not self.namespace or not self.name:
            raise ConfigError("a parent run needs a job namespace and a job name")
        object.__setattr__(self, "run_id", _check_run_id(self.run_id, f"run id of {self.name}"))

    @classmethod
    def parse(cls, text: str, what: str) -> RunReference:
        """``namespace/name/runId``; the namespace may itself contain '/', the last two parts may not."""
        parts = text.rsplit("/", 2)
        if len(parts) != 3:
            raise ConfigError(f"{what} {text!r} must be written namespace/job-name/run-id")
        return cls(parts[0], parts[1], parts[2])


@dataclass(frozen=True)
class OpenLineageSettings:
    namespace: str = DEFAULT_JOB_NAMESPACE
    """Namespace of Lakeline's jobs (the Spark listener's ``namespace``)."""
    dataset_namespace: str = LOCAL_DATASET_NAMESPACE
    glue_catalog: str | None = None
    """``arn:aws:glue:{region}:{account}`` of the tables' Glue catalog: their ``symlinks`` (``naming``)."""
    parent: RunReference | None = None
    root: RunReference | None = None
    transport: dict[str, Any] | None = None
    """openlineage-python transport config; ``None``: events stay in process."""
    client_config: dict[str, Any] = field(default_factory=dict)
    """The other openlineage.yml sections (facets, filters, tags, dataset) for the client."""
    disabled: bool = False

    @property
    def naming(self) -> DatasetNaming:
        return DatasetNaming(self.dataset_namespace, self.glue_catalog)


def find_config_file(environ: Mapping[str, str], cwd: Path, home: Path) -> Path | None:
    named = environ.get("OPENLINEAGE_CONFIG")
    if named:
        path = Path(named)
        if not path.is_file():
            raise ConfigError(f"OPENLINEAGE_CONFIG names {named!r}, which is not a readable file")
        return path
    for candidate in (cwd / "openlineage.yml", home / ".openlineage" / "openlineage.yml"):
        if candidate.is_file():
            return candidate
    return None


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        content = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"cannot read OpenLineage config {path}: {error}") from error
    if content is None:
        return {}
    if not isinstance(content, dict):
        raise ConfigError(f"OpenLineage config {path} must be a mapping, got {type(content).__name__}")
    return content


URL_ALIAS_PREFIX = "OPENLINEAGE__TRANSPORT__TRANSPORTS__DEFAULT_HTTP"
"""Where openlineage-python's client copies ``OPENLINEAGE_URL`` (into ``os.environ``) when it starts."""


def dynamic_config(environ: Mapping[str, str]) -> dict[str, Any]:
    """``OPENLINEAGE__A__B=v`` as ``{"a": {"b": v}}``, the client's own reading of these variables.

    The client's alias of ``OPENLINEAGE_URL`` is left out: the URL is read as itself (``_http_transport``),
    and a process that started a client before (a warm Lambda, a test) must read the same settings again.
    """
    config: dict[str, Any] = {}
    names = [k for k in environ if k.startswith(DYNAMIC_PREFIX)]
    if environ.get("OPENLINEAGE_URL"):
        names = [k for k in names if not k.startswith(URL_ALIAS_PREFIX)]
    for key in sorted(names, reverse=True):
        raw = environ[key]
        value: Any
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        path = [part.lower() for part in key[len(DYNAMIC_PREFIX) :].split("__") if part]
        if not path:
            continue
        node = config
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"{key} nests under {part!r}, which another variable sets to a value")
            node = child
        node[path[-1]] = value
    return config


def _with_url_params(url: str, params: Mapping[str, str]) -> str:
    if not params:
        return url
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query), *sorted(params.items())]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _http_transport(environ: Mapping[str, str]) -> dict[str, Any] | None:
    url = environ.get("OPENLINEAGE_URL")
    if not url:
        return None
    params = {
        key[len(URL_PARAM_PREFIX) :].lower(): value
        for key, value in environ.items()
        if key.startswith(URL_PARAM_PREFIX)
    }
    transport: dict[str, Any] = {"type": "http", "url": url}
    endpoint = environ.get("OPENLINEAGE_ENDPOINT")
    if endpoint or params:
        # The HTTP transport joins url and endpoint, keeping only the endpoint's query string.
        transport["endpoint"] = _with_url_params(endpoint or DEFAULT_HTTP_ENDPOINT, params)
    if environ.get("OPENLINEAGE_API_KEY"):
        transport["auth"] = {"type": "api_key", "apiKey": environ["OPENLINEAGE_API_KEY"]}
    return transport


def _parent(merged: Mapping[str, Any], environ: Mapping[str, str]) -> RunReference | None:
    name = merged.get("parentJobName") or environ.get("OPENLINEAGE_PARENT_JOB_NAME")
    run_id = merged.get("parentRunId") or environ.get("OPENLINEAGE_PARENT_RUN_ID")
    namespace = merged.get("parentJobNamespace") or environ.get("OPENLINEAGE_PARENT_JOB_NAMESPACE")
    if name or run_id:
        if not (name and run_id):
            raise ConfigError("a parent run needs both parentJobName and parentRunId")
        return RunReference(str(namespace or merged.get("namespace") or DEFAULT_JOB_NAMESPACE), str(name), str(run_id))
    if environ.get("OPENLINEAGE_PARENT_ID"):
        return RunReference.parse(environ["OPENLINEAGE_PARENT_ID"], "OPENLINEAGE_PARENT_ID")
    return None


def environment_transport(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The transport of a process configured by its variables alone (a deployed function: no openlineage.yml
    ships with it), as ``load_openlineage_settings`` reads them."""
    transport = dynamic_config(environ).get("transport") or _http_transport(environ)
    return dict(transport) if isinstance(transport, Mapping) else None


def load_openlineage_settings(
    environ: Mapping[str, str],
    *,
    cwd: Path,
    home: Path,
    overrides: Mapping[str, Any] | None = None,
) -> OpenLineageSettings:
    """Settings from the standard OpenLineage sources; see the module docstring for the order."""
    merged: dict[str, Any] = dynamic_config(environ)
    config_file = find_config_file(environ, cwd, home)
    if config_file is not None:
        merged = deep_merge_dicts(merged, _read_yaml(config_file))
    for key, variable in (
        ("namespace", "OPENLINEAGE_NAMESPACE"),
        ("datasetNamespace", "OPENLINEAGE_DATASET_NAMESPACE"),
        ("glueCatalog", "OPENLINEAGE_GLUE_CATALOG"),
    ):
        if environ.get(variable) and key not in merged:
            merged[key] = environ[variable]
    if overrides:
        merged = deep_merge_dicts(merged, {k: v for k, v in overrides.items() if v is not None})

    transport = merged.get("transport") or None
    if transport is None:
        transport = _http_transport(environ)
    if transport is not None and (not isinstance(transport, dict) or not transport.get("type")):
        raise ConfigError("OpenLineage transport config must be a mapping with a 'type' (file, http, console, ...)")
    root = environ.get("OPENLINEAGE_ROOT_PARENT_ID")
    return OpenLineageSettings(
        namespace=str(merged.get("namespace") or DEFAULT_JOB_NAMESPACE),
        dataset_namespace=str(merged.get("datasetNamespace") or LOCAL_DATASET_NAMESPACE),
        glue_catalog=check_glue_catalog(str(merged["glueCatalog"])) if merged.get("glueCatalog") else None,
        parent=_parent(merged, environ),
        root=RunReference.parse(root, "OPENLINEAGE_ROOT_PARENT_ID") if root else None,
        transport=dict(transport) if transport else None,
        client_config={k: v for k, v in merged.items() if k in CLIENT_SECTIONS and k != "transport"},
        disabled=environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true",
    )


def file_transport(path: Path, *, append: bool = True) -> dict[str, Any]:
    """A transport config writing events as JSON lines to one file (openlineage-python's ``file``)."""
    return {"type": "file", "log_file_path": str(path), "append": append}
