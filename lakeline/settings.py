"""Pipeline settings: where each zone lives, naming, and per-table storage choices.

Read once at the edge (CLI options, a ``lakeline.yml``, or Lambda environment variables parsed into
this model) and passed down; no logic reads the environment itself.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lakeline.errors import ConfigError, validation_problems
from lakeline.names import check_identifier
from lakeline.quality.checks import Checks

TableFormat = Literal["PARQUET", "ORC", "JSON", "TEXTFILE"]
# ``incremental``: an arrival's rows are written on their own (one file) next to the partition's files,
# and the partition is compacted back to ``bucket_count`` files past ``max_files``. ``rewrite``: the
# seed's whole-partition rewrite on every arrival (exactly ``bucket_count`` files, cost grows with the
# partition).
WritePolicy = Literal["incremental", "rewrite"]
SchemaEvolution = Literal["reject", "add-columns"]
# Python's codec name -> the charset name Spark's CSV reader accepts (Spark 4 accepts only these).
ENCODINGS = {
    "utf-8": "utf-8",
    "iso8859-1": "iso-8859-1",
    "ascii": "us-ascii",
    "utf-16": "utf-16",
    "utf-16-be": "utf-16be",
    "utf-16-le": "utf-16le",
    "utf-32": "utf-32",
}
COMPRESSIONS: dict[str, frozenset[str]] = {
    "PARQUET": frozenset({"SNAPPY", "GZIP", "ZSTD", "NONE"}),
    "ORC": frozenset({"SNAPPY", "ZLIB", "ZSTD", "NONE"}),
    "JSON": frozenset({"GZIP", "NONE"}),
    "TEXTFILE": frozenset({"GZIP", "NONE"}),
}


class TableSettings(BaseModel):
    """How stage A writes one table. The seed hard-codes one file per partition; here it is a choice."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: TableFormat = "PARQUET"
    compression: str = "SNAPPY"
    bucketed_by: tuple[str, ...] = ()
    bucket_count: int = Field(default=1, ge=1, le=1000)
    write_policy: WritePolicy = "incremental"
    max_files: int | None = Field(
        default=None,
        ge=2,
        le=10000,
        description="incremental: compact past this many files (default 16, or 2 * bucket_count)",
    )

    encoding: str = Field(default="utf-8", description="raw files' text encoding (CSV and JSON)")
    schema_evolution: SchemaEvolution = Field(
        default="reject", description="raw files with columns the table lacks: reject them, or add-columns"
    )
    checks: Checks = Field(
        default=(),
        description="quality rules (DQDL) each stage A run's new version must pass before it is committed",
    )

    @field_validator("encoding")
    @classmethod
    def _known_encoding(cls, value: str) -> str:
        """One of the charsets both Python (the contract check) and Spark's CSV reader know, by the
        name Spark wants."""
        try:
            python_name = codecs.lookup(value).name
        except LookupError as error:
            raise ValueError(f"unknown encoding {value!r}; use one of {', '.join(ENCODINGS.values())}") from error
        if python_name not in ENCODINGS:
            raise ValueError(f"encoding {value!r} is not supported; use one of {', '.join(ENCODINGS.values())}")
        return ENCODINGS[python_name]

    @field_validator("compression")
    @classmethod
    def _upper(cls, value: str) -> str:
        return value.upper()

    @field_validator("bucketed_by")
    @classmethod
    def _identifiers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for column in value:
            check_identifier(column, "bucket column")
        return value

    @property
    def file_limit(self) -> int:
        """Most files an incrementally written partition holds before it is compacted."""
        return self.max_files if self.max_files is not None else max(16, 2 * self.bucket_count)

    @model_validator(mode="after")
    def _max_files_above_buckets(self) -> TableSettings:
        if self.max_files is not None and self.max_files <= self.bucket_count:
            raise ValueError(
                f"max_files ({self.max_files}) must be above bucket_count ({self.bucket_count}): "
                "a compacted partition holds bucket_count files and each arrival adds one"
            )
        return self

    @model_validator(mode="after")
    def _compression_fits_format(self) -> TableSettings:
        if self.compression not in COMPRESSIONS[self.format]:
            raise ValueError(
                f"compression {self.compression} is not available for {self.format}; "
                f"use one of {sorted(COMPRESSIONS[self.format])}"
            )
        return self


class PipelineSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    raw_root: str = Field(description="location of the raw zone, e.g. s3://raw-bucket/ or file:///ws/raw/")
    stage_root: str
    analytics_root: str = ""
    environment: str | None = Field(default=None, description="suffix of database names, e.g. dev")
    default_table: TableSettings = TableSettings()
    tables: dict[str, TableSettings] = Field(
        default_factory=dict, description="per stage table, keyed 'database.table'"
    )

    @field_validator("environment")
    @classmethod
    def _environment(cls, value: str | None) -> str | None:
        return None if value in (None, "") else check_identifier(value, "environment")

    def _suffix(self) -> str:
        return f"_{self.environment}" if self.environment else ""

    def raw_database(self, team: str, dataset: str) -> str:
        return check_identifier(f"{team}_{dataset}_raw{self._suffix()}", "raw database")

    def stage_database(self, team: str, dataset: str) -> str:
        return check_identifier(f"{team}_{dataset}{self._suffix()}", "stage database")

    def table_settings(self, database: str, table: str) -> TableSettings:
        return self.tables.get(f"{database}.{table}", self.default_table)

    @classmethod
    def from_yaml(cls, path: Path) -> PipelineSettings:
        return read_yaml_model(
            cls,
            path,
            what="settings from ",
            select=lambda data: data.get("pipeline", data) if isinstance(data, dict) else data,
        )


Model = TypeVar("Model", bound=BaseModel)


def read_yaml_model(
    model: type[Model], path: Path, *, what: str = "", select: Callable[[Any], Any] = lambda data: data
) -> Model:
    """The YAML file ``path`` (``select``: the part of its document that is the model) as ``model``; a file that
    cannot be read (``cannot read <what><path>``) or does not fit is one readable ``ConfigError``."""
    import yaml  # only the CLI reads YAML; Lambda code must not need PyYAML

    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"cannot read {what}{path}: {error}") from error
    try:
        return model.model_validate(select(data))
    except pydantic.ValidationError as error:  # one readable error, not a traceback
        raise ConfigError(f"{path}: " + "; ".join(validation_problems(error))) from None
