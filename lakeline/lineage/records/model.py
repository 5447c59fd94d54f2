"""Lineage records: the request a pipeline step sends, and the standard record that goes on the queue.

A request names the step (``root_id``, ``parent_id``, ``action_taken``) and the outputs it wrote, in
one of the seed's three shapes: a flat ``storage_location`` (with an optional ``node_id``), a single
``record``, or a batch of ``records``. Each output becomes one standard record, stamped with
``recordedAt`` (epoch seconds, UTC) and ``ttl_expiry`` (epoch seconds; the lineage table's TTL).

Node ids are deterministic when the caller does not give one::

    node_id = uuid5(NODE_NAMESPACE, root_id + US + parent_id + US + action_taken + US + storage_location)

(US is the ASCII unit separator, which no id, action or location may contain). A step that is
retried or redelivered therefore describes the same node and overwrites it instead of adding a twin.

Ids use letters, digits and ``_ - . :``, never start with ``_`` (the table keeps its bookkeeping
items under ``_``-prefixed keys, see ``lakeline.lineage.records.table``) and are at most 200 characters, so
that they are also safe inside archive object keys.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from lakeline.commits.versions import VERSION_PATTERN
from lakeline.errors import InvalidInputError, validated

NODE_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/lakeline/lineage/node")
DEFAULT_TTL = timedelta(hours=24)
MAX_RECORDS_PER_REQUEST = 10_000
_UNIT_SEPARATOR = "\x1f"

ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-.:]{0,199}$")
ACTION_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,127}$")
LOCATION_PATTERN = re.compile(r"^[a-z][a-z0-9+.\-]*://\S+$")
JOB_NAME_PATTERN = re.compile(r"^\S+/\S+$")

# The seed's terminus actions, and the ones Lakeline's stages record when a run ends. A leaf whose
# action is not terminal is archived as "unterminated" (the run stopped before it finished).
RAW_DATA_INPUT = "RAW_DATA_INPUT"  # the seed's action of a raw file, the first step of a run's tree
DQ_CHECK_FAIL = "DQ_CHECK_FAIL"  # the seed's action of a failed data quality check: Lakeline's blocked versions (#41)
SEED_TERMINAL_ACTIONS = ("CALCULATION_COMPLETE", DQ_CHECK_FAIL)
LAKELINE_TERMINAL_ACTIONS = ("STAGE_A_COMPLETE", "STAGE_B_COMPLETE", "STEP_FAILED")
DEFAULT_TERMINAL_ACTIONS = frozenset(SEED_TERMINAL_ACTIONS + LAKELINE_TERMINAL_ACTIONS)


def _matching(pattern: re.Pattern[str], refusal: str, *, longest: int | None = None) -> Callable[[str], str]:
    """The check that a value matches ``pattern`` whole (and is at most ``longest`` characters): the value, else
    ``ValueError``: its first 100 characters, then ``refusal``."""

    def check(value: str) -> str:
        if (longest is not None and len(value) > longest) or not pattern.fullmatch(value):
            raise ValueError(f"{value[:100]!r} {refusal}")
        return value

    return check


_check_id = _matching(
    ID_PATTERN,
    "is not a valid lineage id: use letters, digits and '_', '-', '.', ':', start with a letter or digit, "
    "at most 200 characters",
)
_check_action = _matching(
    ACTION_PATTERN,
    "is not a valid action: use letters, digits and '_', starting with a letter, at most 128 characters "
    "(e.g. RAW_DATA_INPUT)",
)
_check_location = _matching(
    LOCATION_PATTERN,
    "is not a storage location: write it as a URI such as s3://bucket/key, without spaces, at most 2048 characters",
    longest=2048,
)


def _check_run_id(value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise ValueError(f"{value!r} is not an OpenLineage run id (a UUID)") from None


_check_job_name = _matching(
    JOB_NAME_PATTERN, "is not an OpenLineage job: write it namespace/name, without spaces", longest=512
)


def _check_dataset(value: str) -> str:
    if not value or len(value) > 512 or any(ch.isspace() or ord(ch) < 32 for ch in value):
        raise ValueError(f"{value!r} is not a dataset name: 1 to 512 characters, without spaces")
    return value


_check_version = _matching(VERSION_PATTERN, "is not a partition version token (v<version>.<run token>)")


def check_lineage_id(value: str, what: str) -> str:
    """``value`` if it is a valid lineage id, else ``InvalidInputError`` naming ``what``."""
    try:
        return _check_id(value)
    except ValueError as error:
        raise InvalidInputError(f"{what} {error}") from None


LineageId = Annotated[str, AfterValidator(_check_id)]
ActionName = Annotated[str, AfterValidator(_check_action)]
StorageLocation = Annotated[str, AfterValidator(_check_location)]
RunId = Annotated[str, AfterValidator(_check_run_id)]
JobName = Annotated[str, AfterValidator(_check_job_name)]
DatasetName = Annotated[str, AfterValidator(_check_dataset)]
DatasetVersion = Annotated[str, AfterValidator(_check_version)]


def uuid5_text(namespace: uuid.UUID, name: str) -> str:
    """``str(uuid.uuid5(namespace, name))``, without building a UUID object (the trace makes many)."""
    digest = bytearray(hashlib.sha1(namespace.bytes + name.encode(), usedforsecurity=False).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    text = digest.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def deterministic_node_id(root_id: str, parent_id: str, action_taken: str, storage_location: str) -> str:
    """The node id of a step's output when the caller gives none (see the module docstring)."""
    return uuid5_text(NODE_NAMESPACE, _UNIT_SEPARATOR.join((root_id, parent_id, action_taken, storage_location)))


class LineageRecord(BaseModel):
    """One node of a root's lineage tree: the queue message body and the lineage table item."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    root_id: LineageId
    node_id: LineageId
    parent_id: LineageId
    action_taken: ActionName
    storage_location: StorageLocation
    recorded_at: int = Field(alias="recordedAt", ge=0, description="epoch seconds, UTC")
    ttl_expiry: int = Field(ge=0, description="epoch seconds after which DynamoDB may delete the item")
    run_id: RunId | None = None
    job_name: JobName | None = None
    dataset: DatasetName | None = None
    version: DatasetVersion | None = None
    """The partition version the node's output is (``lakeline.commits.versions``), when it is one."""

    @model_validator(mode="after")
    def _links(self) -> LineageRecord:
        _check_links(self.root_id, self.parent_id, self.node_id)
        return self

    def to_message(self) -> dict[str, Any]:
        """The seed's queue shape: ``recordedAt`` camel-cased, absent optional fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True)


def _check_links(root_id: str, parent_id: str, node_id: str | None) -> None:
    if node_id is None:
        return
    if node_id == parent_id:
        raise ValueError(f"node {node_id!r} cannot be its own parent")
    if node_id == root_id:
        raise ValueError(
            f"node_id {node_id!r} equals root_id: the root is the parent of a run's first step, not a node"
        )


class OutputRecord(BaseModel):
    """One output of a step, as the seed's ``record`` / ``records`` entries."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    storage_location: StorageLocation
    node_id: LineageId | None = None
    dataset: DatasetName | None = None
    version: DatasetVersion | None = None


class LineageRequest(BaseModel):
    """A step's lineage request in any of the seed's shapes; exactly one of the three is given."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    root_id: LineageId
    parent_id: LineageId
    action_taken: ActionName
    storage_location: StorageLocation | None = None
    node_id: LineageId | None = None
    record: OutputRecord | None = None
    records: list[OutputRecord] | None = Field(default=None, max_length=MAX_RECORDS_PER_REQUEST)
    run_id: RunId | None = None
    job_name: JobName | None = None
    dataset: DatasetName | None = None
    version: DatasetVersion | None = None

    @model_validator(mode="after")
    def _one_shape(self) -> LineageRequest:
        given = [
            name
            for name, value in (
                ("storage_location", self.storage_location),
                ("record", self.record),
                ("records", self.records),
            )
            if value is not None
        ]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of storage_location (one output), record (one output) or "
                f"records (several outputs); got {', '.join(given) if given else 'none of them'}"
            )
        if self.node_id is not None and self.storage_location is None:
            raise ValueError("node_id at the top level goes with storage_location; put it inside record(s)")
        if self.records is not None and not self.records:
            raise ValueError("records must hold at least one record")
        return self

    def outputs(self) -> list[OutputRecord]:
        if self.records is not None:
            return list(self.records)
        if self.record is not None:
            return [self.record]
        assert self.storage_location is not None  # guaranteed by _one_shape
        return [OutputRecord(storage_location=self.storage_location, node_id=self.node_id)]


def parse_request(data: Mapping[str, Any] | LineageRequest) -> LineageRequest:
    """Validate a lineage request, raising ``InvalidInputError`` that names every wrong field."""
    if isinstance(data, LineageRequest):
        return data
    return validated(LineageRequest, data, "lineage request")


def parse_record(data: Mapping[str, Any] | str | bytes) -> LineageRecord:
    """Validate one standard record (a dict or its JSON text)."""
    if isinstance(data, str | bytes):
        try:
            data = json.loads(data)
        except ValueError as error:
            raise InvalidInputError(f"invalid lineage record: not JSON ({error})") from None
    return validated(LineageRecord, data, "lineage record")


def build_records(
    request: Mapping[str, Any] | LineageRequest, *, now: datetime, ttl: timedelta = DEFAULT_TTL
) -> list[LineageRecord]:
    """The standard records of one request, all stamped with the same ``recordedAt``."""
    parsed = parse_request(request)
    if now.tzinfo is None:
        raise InvalidInputError("the recording time must be timezone-aware (UTC)")
    if ttl.total_seconds() < 1:
        raise InvalidInputError(f"the lineage TTL must be at least one second, got {ttl}")
    recorded_at = int(now.timestamp())
    ttl_expiry = recorded_at + int(ttl.total_seconds())
    records: list[LineageRecord] = []
    seen: dict[str, int] = {}
    for index, output in enumerate(parsed.outputs()):
        node_id = output.node_id or deterministic_node_id(
            parsed.root_id, parsed.parent_id, parsed.action_taken, output.storage_location
        )
        if node_id in seen:
            raise InvalidInputError(
                f"invalid lineage request: records[{index}] repeats node {node_id!r} of "
                f"records[{seen[node_id]}] (same node_id or same storage_location)"
            )
        seen[node_id] = index
        try:
            _check_links(parsed.root_id, parsed.parent_id, node_id)
        except ValueError as error:
            raise InvalidInputError(f"invalid lineage request: {error}") from None
        records.append(
            LineageRecord(
                root_id=parsed.root_id,
                node_id=node_id,
                parent_id=parsed.parent_id,
                action_taken=parsed.action_taken,
                storage_location=output.storage_location,
                recorded_at=recorded_at,
                ttl_expiry=ttl_expiry,
                run_id=parsed.run_id,
                job_name=parsed.job_name,
                dataset=output.dataset or parsed.dataset,
                version=output.version or parsed.version,
            )
        )
    return records


def build_requests_records(
    requests: Sequence[Mapping[str, Any] | LineageRequest], *, now: datetime, ttl: timedelta = DEFAULT_TTL
) -> list[LineageRecord]:
    """Records of several requests; a bad request is reported with its position."""
    records: list[LineageRecord] = []
    for index, request in enumerate(requests):
        try:
            records.extend(build_records(request, now=now, ttl=ttl))
        except InvalidInputError as error:
            raise InvalidInputError(f"request {index}: {error}") from None
    return records
