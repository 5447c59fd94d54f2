"""The project's table settings as deployed: a JSON file in the functions' code asset
(``stacks.constructs.bundling.LambdaCodeBundle`` writes it), not their environment, which Lambda bounds at 4 KB
all together (``lakeline.aws.lambda_limits``): a table's quality checks alone may hold 64,000 bytes of rules. In
the asset, the settings a function reads are those its code was deployed with, replaced with it in one update."""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from lakeline.errors import ConfigError, validation_problems
from lakeline.settings import TableSettings

TABLE_SETTINGS_FILE = "table_settings.json"
"""Its name in the ``lambdas`` package of the code asset."""


class DeployedTableSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    default: TableSettings = TableSettings()
    tables: dict[str, TableSettings] = Field(default_factory=dict)  # keyed 'database.table'


def read_table_settings(text: str) -> DeployedTableSettings:
    try:
        return DeployedTableSettings.model_validate_json(text)
    except pydantic.ValidationError as error:
        raise ConfigError(f"{TABLE_SETTINGS_FILE}: {'; '.join(validation_problems(error))}") from error


@cache  # once per cold start: the file is part of the code, which does not change under a running environment
def deployed_table_settings(path: str | None = None) -> DeployedTableSettings:
    """The settings in this code asset (or in the file ``path``: ``RouterEnvironment.table_settings_file``); a
    ``ConfigError`` naming the file when it is missing (code not bundled by the CDK app, e.g. the repository's own
    folder) or invalid."""
    try:
        if path is not None:
            text = Path(path).read_text()
        else:
            text = resources.files(__package__ or "lambdas").joinpath(TABLE_SETTINGS_FILE).read_text()
    except FileNotFoundError as error:
        raise ConfigError(
            f"no {path or TABLE_SETTINGS_FILE + ' beside the handlers'}: the code asset is built by the CDK app "
            "(stacks.constructs.bundling), which writes the project's table settings there"
        ) from error
    return read_table_settings(text)
