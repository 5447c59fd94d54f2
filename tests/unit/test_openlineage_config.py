"""OpenLineage settings from openlineage.yml, OPENLINEAGE_* variables and overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeline.errors import ConfigError
from lakeline.lineage.openlineage.config import (
    DEFAULT_JOB_NAMESPACE,
    LOCAL_DATASET_NAMESPACE,
    RunReference,
    athena_dataset_namespace,
    load_openlineage_settings,
)

RUN_ID = "01930000-0000-7000-8000-00000000abcd"


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    cwd, home = tmp_path / "cwd", tmp_path / "home"
    cwd.mkdir()
    home.mkdir()
    return cwd, home


def test_nothing_configured_keeps_events_in_process(dirs: tuple[Path, Path]) -> None:
    cwd, home = dirs
    settings = load_openlineage_settings({}, cwd=cwd, home=home)
    assert settings.transport is None
    assert settings.namespace == DEFAULT_JOB_NAMESPACE
    assert settings.dataset_namespace == LOCAL_DATASET_NAMESPACE
    assert settings.parent is None
    assert not settings.disabled


def test_openlineage_yml_in_the_working_folder(dirs: tuple[Path, Path]) -> None:
    cwd, home = dirs
    (cwd / "openlineage.yml").write_text(
        "transport:\n  type: file\n  log_file_path: /tmp/ol.jsonl\n  append: true\n"
        "facets:\n  environment_variables: [USER]\n"
        f"namespace: analytics\nparentJobName: pipeline\nparentRunId: {RUN_ID}\n"
        "datasetNamespace: awsathena://athena.eu-west-1.amazonaws.com\n"
    )
    settings = load_openlineage_settings({}, cwd=cwd, home=home)
    assert settings.transport == {"type": "file", "log_file_path": "/tmp/ol.jsonl", "append": True}
    assert settings.client_config == {"facets": {"environment_variables": ["USER"]}}
    assert settings.namespace == "analytics"
    assert settings.parent == RunReference("analytics", "pipeline", RUN_ID)
    assert settings.dataset_namespace == athena_dataset_namespace("eu-west-1")


def test_home_config_and_named_config(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    cwd, home = dirs
    (home / ".openlineage").mkdir()
    (home / ".openlineage" / "openlineage.yml").write_text("transport:\n  type: console\n")
    assert load_openlineage_settings({}, cwd=cwd, home=home).transport == {"type": "console"}
    named = tmp_path / "elsewhere.yml"
    named.write_text("transport:\n  type: http\n  url: http://127.0.0.1:5000\n")
    settings = load_openlineage_settings({"OPENLINEAGE_CONFIG": str(named)}, cwd=cwd, home=home)
    assert settings.transport == {"type": "http", "url": "http://127.0.0.1:5000"}
    with pytest.raises(ConfigError, match="not a readable file"):
        load_openlineage_settings({"OPENLINEAGE_CONFIG": str(tmp_path / "missing.yml")}, cwd=cwd, home=home)


def test_dynamic_variables_nest_and_parse_json(dirs: tuple[Path, Path]) -> None:
    cwd, home = dirs
    environ = {
        "OPENLINEAGE__TRANSPORT__TYPE": "http",
        "OPENLINEAGE__TRANSPORT__URL": "http://127.0.0.1:5000",
        "OPENLINEAGE__TRANSPORT__AUTH": '{"type": "api_key", "apiKey": "k"}',
        "OPENLINEAGE__TRANSPORT__TIMEOUT": "2.5",
    }
    settings = load_openlineage_settings(environ, cwd=cwd, home=home)
    assert settings.transport == {
        "type": "http",
        "url": "http://127.0.0.1:5000",
        "auth": {"type": "api_key", "apiKey": "k"},
        "timeout": 2.5,
    }


def test_the_file_wins_over_variables_and_overrides_win_over_both(dirs: tuple[Path, Path]) -> None:
    cwd, home = dirs
    (cwd / "openlineage.yml").write_text("transport:\n  type: console\nnamespace: from_file\n")
    environ = {"OPENLINEAGE__TRANSPORT__TYPE": "noop", "OPENLINEAGE_NAMESPACE": "from_env"}
    settings = load_openlineage_settings(environ, cwd=cwd, home=home)
    assert settings.transport == {"type": "console"}
    assert settings.namespace == "from_file"
    settings = load_openlineage_settings(environ, cwd=cwd, home=home, overrides={"namespace": "cli", "x": None})
    assert settings.namespace == "cli"


def test_spark_listener_equivalents_as_variables(dirs: tuple[Path, Path]) -> None:
    cwd, home = dirs
    environ = {
        "OPENLINEAGE_URL": "http://127.0.0.1:5000",
        "OPENLINEAGE_ENDPOINT": "api/v1/lineage?existing=1",
        "OPENLINEAGE_API_KEY": "secret",
        "OPENLINEAGE_URL_PARAM_CODE": "abc",
        "OPENLINEAGE_NAMESPACE": "sales",
        "OPENLINEAGE_PARENT_JOB_NAME": "pipeline.sales",
        "OPENLINEAGE_PARENT_RUN_ID": RUN_ID.upper(),
        "OPENLINEAGE_ROOT_PARENT_ID": f"scheduler/nightly/{RUN_ID}",
    }
    settings = load_openlineage_settings(environ, cwd=cwd, home=home)
    assert settings.transport == {
        "type": "http",
        "url": "http://127.0.0.1:5000",
        "endpoint": "api/v1/lineage?existing=1&code=abc",
        "auth": {"type": "api_key", "apiKey": "secret"},
    }
    assert settings.namespace == "sales"
    assert settings.parent == RunReference("sales", "pipeline.sales", RUN_ID)
    assert settings.root == RunReference("scheduler", "nightly", RUN_ID)


def test_parent_id_in_one_variable(dirs: tuple[Path, Path]) -> None:
    cwd, home = dirs
    settings = load_openlineage_settings(
        {"OPENLINEAGE_PARENT_ID": f"s3://ns/with/slashes/job/{RUN_ID}"}, cwd=cwd, home=home
    )
    assert settings.parent == RunReference("s3://ns/with/slashes", "job", RUN_ID)


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"OPENLINEAGE_PARENT_JOB_NAME": "p"}, "needs both parentJobName and parentRunId"),
        ({"OPENLINEAGE_PARENT_JOB_NAME": "p", "OPENLINEAGE_PARENT_RUN_ID": "42"}, "'42' is not a UUID"),
        ({"OPENLINEAGE_PARENT_ID": "only/two"}, "namespace/job-name/run-id"),
        ({"OPENLINEAGE__TRANSPORT__URL": "http://x"}, "with a 'type'"),
    ],
)
def test_bad_settings_name_the_problem(environ: dict[str, str], message: str, dirs: tuple[Path, Path]) -> None:
    cwd, home = dirs
    with pytest.raises(ConfigError, match=message):
        load_openlineage_settings(environ, cwd=cwd, home=home)


def test_unreadable_yaml_is_an_error(dirs: tuple[Path, Path]) -> None:
    cwd, home = dirs
    (cwd / "openlineage.yml").write_text("- a list\n- not a mapping\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_openlineage_settings({}, cwd=cwd, home=home)
    (cwd / "openlineage.yml").write_text("transport: [unclosed\n")
    with pytest.raises(ConfigError, match="cannot read OpenLineage config"):
        load_openlineage_settings({}, cwd=cwd, home=home)


def test_disabled(dirs: tuple[Path, Path]) -> None:
    cwd, home = dirs
    settings = load_openlineage_settings(
        {"OPENLINEAGE_DISABLED": "TRUE", "OPENLINEAGE_URL": "http://127.0.0.1:1"}, cwd=cwd, home=home
    )
    assert settings.disabled


def test_the_clients_own_alias_of_the_url_is_read_as_the_url(tmp_path: Path) -> None:
    # openlineage-python's client writes these into os.environ when OPENLINEAGE_URL is set; a warm process
    # that loads the settings again must see the same HTTP transport, not a transport without a type.
    environ = {
        "OPENLINEAGE_URL": "http://marquez:5000",
        "OPENLINEAGE__TRANSPORT__TRANSPORTS__DEFAULT_HTTP__TYPE": "http",
        "OPENLINEAGE__TRANSPORT__TRANSPORTS__DEFAULT_HTTP__URL": "http://marquez:5000",
    }
    settings = load_openlineage_settings(environ, cwd=tmp_path, home=tmp_path)
    assert settings.transport == {"type": "http", "url": "http://marquez:5000"}
