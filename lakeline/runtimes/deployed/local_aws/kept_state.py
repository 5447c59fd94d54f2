"""What a local deployment holds, kept in a folder between commands and put back into the next one.

In AWS a deployment lives on between two uploads: its buckets, tables, Glue catalog and dead-letter queues
keep what earlier arrivals left. A deployment stood up on this machine lives as long as the command that
stood it up, so ``keep`` writes what it holds into a folder and ``restore`` puts it into the next deployment
of the same stacks (deployed with stable names, ``moto_fixes.stable_resource_names``, so what the state
names, an ``s3://`` location in a Glue partition or a pipeline-state item, is found again):

- S3: every object of the stacks' buckets (content-addressed files and a manifest of keys, content types
  and user metadata);
- DynamoDB: every item of the stacks' tables (pipeline state, leases and what was routed, lineage records,
  dependency items);
- Glue: every database, table and partition of the account (a table the stacks made is left as the
  stacks make it; its partitions are put back);
- SQS: the messages waiting in the stacks' queues (the dead-letter queues' parked messages, with the reasons
  they carry).

Putting the state back is not an event: while ``restore`` runs, S3 sends no event notification (a raw
object put back would otherwise arrive again) and DynamoDB streams deliver nothing (the dependencies
stream would rebuild what is put back anyway). ``keep`` writes the whole state beside the folder and swaps
it in, so a crash while keeping leaves the state before. What is not kept: Step Functions' execution
history (a name used in an earlier command can be used again), CloudWatch, and Athena's query history.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakeline.errors import LakelineError
from lakeline.project.workspace import write_json
from lakeline.runtimes.deployed.local_aws.deploy import Deployment

KEPT_STATE_FORMAT = 1
MANIFEST = "manifest.json"
TRANSIENT_BUCKETS = ("ArtifactsBucket", "AthenaResultsBucket")
"""Buckets not kept, by logical id: the artifacts bucket is filled by the deployment itself (the stacks'
query files) and by each command (the project's); Athena's results are read once, as the query ends (and
expire after 30 days in AWS)."""
BATCH_ITEMS = 25  # BatchWriteItem's limit
BATCH_PARTITIONS = 100  # BatchCreatePartition's limit
TABLE_INPUT = ("Name", "Description", "Owner", "Retention", "StorageDescriptor", "PartitionKeys", "TableType")
TABLE_INPUT_MORE = ("Parameters", "ViewOriginalText", "ViewExpandedText")


class KeptStateError(LakelineError):
    """A kept state cannot be put into this deployment (another environment's, or another format's)."""


@dataclass(frozen=True)
class Restored:
    objects: int = 0
    items: int = 0
    tables: int = 0
    partitions: int = 0
    messages: int = 0

    def described(self) -> str:
        return (
            f"{self.objects} S3 objects, {self.items} DynamoDB items, {self.tables} Glue tables with "
            f"{self.partitions} partitions, {self.messages} queued messages"
        )


def exists(folder: Path) -> bool:
    """Whether a state is kept in ``folder`` (or in the one ``keep`` set aside, had it stopped between its two
    renames: ``recover`` puts it back)."""
    return (folder / MANIFEST).is_file() or (_previous(folder) / MANIFEST).is_file()


def require(folder: Path) -> None:
    """Fail, saying what to run, unless a state is kept in ``folder``."""
    if not exists(folder):
        raise KeptStateError(f"no local deployment is kept in {folder}: run `lakeline run` first")


def check(folder: Path) -> None:
    """Fail (``KeptStateError``, saying what to do) if the state kept in ``folder`` does not read back whole:
    before a command stands a deployment up to put it back, or vouches that nothing is new since it."""
    where = _readable(folder)
    if where is not None:
        _manifest(where, with_objects=True)


def kept_at(folder: Path) -> float | None:
    """When the state in ``folder`` was kept (its manifest's modification time), or None if none is."""
    for manifest in (folder / MANIFEST, _previous(folder) / MANIFEST):
        if manifest.is_file():
            return manifest.stat().st_mtime
    return None


def recover(folder: Path) -> None:
    """After a ``keep`` that stopped between setting the old state aside and putting the new one in place."""
    if not (folder / MANIFEST).is_file() and (_previous(folder) / MANIFEST).is_file():
        shutil.rmtree(folder, ignore_errors=True)
        _previous(folder).rename(folder)


def _previous(folder: Path) -> Path:
    return folder.with_name(folder.name + ".old")


def keep(deployment: Deployment, folder: Path, *, extra: dict[str, Any] | None = None) -> None:
    """Write what ``deployment`` holds into ``folder`` (replacing what it had, whole or not at all), with
    ``extra`` (what the caller wants kept with it, read back by ``kept_extra``)."""
    recover(folder)
    staged = folder.with_name(folder.name + ".new")
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    resources = _resources(deployment)
    manifest: dict[str, Any] = {
        "format": KEPT_STATE_FORMAT,
        "stacks": sorted(deployment.outputs),
        "outputs": deployment.outputs,
        "extra": extra or {},
    }
    manifest["buckets"] = {
        bucket: _keep_bucket(deployment, bucket, staged / "objects") for bucket in resources["AWS::S3::Bucket"]
    }
    manifest["tables"] = {table: _items(deployment, table) for table in resources["AWS::DynamoDB::Table"]}
    manifest["catalog"] = _catalog(deployment)
    manifest["queues"] = {url: _messages(deployment, url) for url in resources["AWS::SQS::Queue"]}
    write_json(staged / MANIFEST, _encoded(manifest), sort_keys=True)
    previous = _previous(folder)
    shutil.rmtree(previous, ignore_errors=True)
    if folder.exists():
        folder.rename(previous)
    staged.rename(folder)
    shutil.rmtree(previous, ignore_errors=True)


def _readable(folder: Path) -> Path | None:
    """Where the kept state is to be read: ``folder``, or the state ``keep`` set aside if it is caught between
    its two renames. Readers never ``recover``: a rename of theirs could meet a ``keep`` running meanwhile."""
    for where in (folder, _previous(folder)):
        if (where / MANIFEST).is_file():
            return where
    return None


def kept_extra(folder: Path) -> dict[str, Any]:
    """What ``keep`` was given as ``extra`` (empty if nothing is kept)."""
    where = _readable(folder)
    return dict(_manifest(where).get("extra", {})) if where else {}


@dataclass(frozen=True)
class KeptMessage:
    body: str
    attributes: dict[str, dict[str, str]]


def kept_messages(folder: Path) -> tuple[dict[str, dict[str, str]], dict[str, list[KeptMessage]]]:
    """The kept stacks' outputs (by stack) and the messages kept of each queue (by URL), read from the folder
    alone (nothing is stood up); both empty if nothing is kept."""
    where = _readable(folder)
    if where is None:
        return {}, {}
    manifest = _manifest(where)
    queues = {
        url: [KeptMessage(message["body"], message["attributes"]) for message in messages]
        for url, messages in manifest.get("queues", {}).items()
    }
    return dict(manifest.get("outputs", {})), queues


def kept_object_reader(folder: Path) -> Callable[[str], str | None]:
    """The text of a kept object by its ``s3://`` location (``None`` if none is kept there), read from the folder
    alone: what ``status`` reads of a kept deployment's buckets (the quality reports)."""
    where = _readable(folder)
    kept: dict[str, str] = {
        f"s3://{bucket}/{entry['key']}": entry["sha256"]
        for bucket, entries in (_manifest(where)["buckets"].items() if where else ())
        for entry in entries
    }

    def read(location: str) -> str | None:
        digest = kept.get(location)
        if where is None or digest is None:
            return None
        return (where / "objects" / digest).read_text(encoding="utf-8")

    return read


def kept_tables(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """Each kept DynamoDB table (by name) → its items (DynamoDB's typed JSON), read from the folder alone."""
    where = _readable(folder)
    if where is None:
        return {}
    return {name: [_decoded(item) for item in items] for name, items in _manifest(where).get("tables", {}).items()}


def restore(deployment: Deployment, folder: Path) -> Restored:
    """Put what ``keep`` wrote into ``folder`` into ``deployment``, a deployment of the same stacks."""
    recover(folder)
    manifest = _manifest(folder, with_objects=True)
    if manifest.get("format") != KEPT_STATE_FORMAT:
        raise KeptStateError(f"{folder} was kept by another version of Lakeline (format {manifest.get('format')})")
    if manifest["stacks"] != sorted(deployment.outputs):
        raise KeptStateError(
            f"{folder} holds the state of the stacks {', '.join(manifest['stacks'])}, not of "
            f"{', '.join(sorted(deployment.outputs))} (another environment?): move it away to start afresh"
        )
    resources = _resources(deployment)
    kinds = {"buckets": "AWS::S3::Bucket", "tables": "AWS::DynamoDB::Table", "queues": "AWS::SQS::Queue"}
    for kept, kind in kinds.items():
        missing = sorted(set(manifest[kept]) - set(resources[kind]))
        if missing:
            raise KeptStateError(
                f"{folder} holds {kind} {', '.join(missing)}, which this deployment does not have: "
                "move the folder away to start afresh"
            )
    objects = items = messages = 0
    with _quiet():
        s3 = deployment.client("s3")
        for bucket, entries in manifest["buckets"].items():
            for entry in entries:
                extra = {"ContentType": entry["content_type"]} if entry.get("content_type") else {}
                body = (folder / "objects" / entry["sha256"]).read_bytes()
                s3.put_object(Bucket=bucket, Key=entry["key"], Body=body, Metadata=entry["metadata"], **extra)
                objects += 1
        dynamodb = deployment.client("dynamodb")
        for table, kept_items in manifest["tables"].items():
            for start in range(0, len(kept_items), BATCH_ITEMS):
                batch = [{"PutRequest": {"Item": _decoded(item)}} for item in kept_items[start : start + BATCH_ITEMS]]
                _write_batch(dynamodb, table, batch)
                items += len(batch)
    tables, partitions = _restore_catalog(deployment, manifest["catalog"])
    sqs = deployment.client("sqs")
    for url, kept_messages in manifest["queues"].items():
        for message in kept_messages:
            attributes = _decoded(message["attributes"])
            sqs.send_message(QueueUrl=url, MessageBody=message["body"], MessageAttributes=attributes)
            messages += 1
    return Restored(objects, items, tables, partitions, messages)


MANIFEST_SHAPE: dict[str, type] = {
    "format": int,
    "stacks": list,
    "outputs": dict,
    "extra": dict,
    "buckets": dict,
    "tables": dict,
    "catalog": list,
    "queues": dict,
}


def _start_afresh(folder: Path) -> str:
    return (
        f"restore {folder} from a copy, or move it aside and run again: the local deployment then starts "
        "afresh and every table is loaded again from the raw files"
    )


def _manifest(folder: Path, *, with_objects: bool = False) -> dict[str, Any]:
    """The kept state's manifest, checked whole before anything reads it: ``KeptStateError`` saying what
    to do if it cannot be read, is not of the shape ``keep`` writes, or (``with_objects``) names an object
    whose content is missing from the folder."""
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise KeptStateError(f"the kept state {path} cannot be read ({error}); {_start_afresh(folder)}") from None
    wrong = (
        [name for name, kind in MANIFEST_SHAPE.items() if not isinstance(manifest.get(name), kind)]
        if isinstance(manifest, dict)
        else ["the whole file"]
    )
    if wrong:
        raise KeptStateError(
            f"the kept state {path} is not what Lakeline keeps ({wrong[0]} is missing or of another kind); "
            f"{_start_afresh(folder)}"
        )
    if with_objects:
        for bucket, entries in manifest["buckets"].items():
            for entry in entries:
                digest = entry.get("sha256") if isinstance(entry, dict) else None
                if not isinstance(digest, str) or not (folder / "objects" / digest).is_file():
                    raise KeptStateError(
                        f"the kept state {folder} lacks the content of s3://{bucket}/{entry.get('key', '?')} "
                        f"(objects/{digest}); {_start_afresh(folder)}"
                    )
    return dict(manifest)


def _resources(deployment: Deployment) -> dict[str, list[str]]:
    """The physical ids of the stacks' resources, by type (a queue's is its URL)."""
    cloudformation = deployment.client("cloudformation")
    found: dict[str, list[str]] = {kind: [] for kind in ("AWS::S3::Bucket", "AWS::DynamoDB::Table", "AWS::SQS::Queue")}
    for stack in sorted(deployment.outputs):
        pages = cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack)
        for page in pages:
            for resource in page["StackResourceSummaries"]:
                if resource["LogicalResourceId"].startswith(TRANSIENT_BUCKETS):
                    continue
                if resource["ResourceType"] in found and resource.get("PhysicalResourceId"):
                    found[resource["ResourceType"]].append(resource["PhysicalResourceId"])
    return {kind: sorted(ids) for kind, ids in found.items()}


def _keep_bucket(deployment: Deployment, bucket: str, objects: Path) -> list[dict[str, Any]]:
    s3 = deployment.client("s3")
    entries = []
    objects.mkdir(parents=True, exist_ok=True)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for listed in page.get("Contents", []):
            got = s3.get_object(Bucket=bucket, Key=listed["Key"])
            body = got["Body"].read()
            digest = hashlib.sha256(body).hexdigest()
            path = objects / digest
            if not path.exists():
                path.write_bytes(body)
            entries.append(
                {
                    "key": listed["Key"],
                    "sha256": digest,
                    "content_type": got.get("ContentType", ""),
                    "metadata": got.get("Metadata", {}),
                }
            )
    return entries


def _items(deployment: Deployment, table: str) -> list[dict[str, Any]]:
    dynamodb = deployment.client("dynamodb")
    found: list[dict[str, Any]] = []
    for page in dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        found.extend(page.get("Items", []))
    return sorted(found, key=lambda item: json.dumps(_encoded(item), sort_keys=True))


def _catalog(deployment: Deployment) -> list[dict[str, Any]]:
    """Every Glue database with its tables, each table with its partitions."""
    glue = deployment.client("glue")
    databases = []
    for page in glue.get_paginator("get_databases").paginate():
        for database in page["DatabaseList"]:
            name = database["Name"]
            entry: dict[str, Any] = {"input": _subset(database, ("Name", "Description", "LocationUri", "Parameters"))}
            entry["tables"] = []
            for tables in glue.get_paginator("get_tables").paginate(DatabaseName=name):
                for table in tables["TableList"]:
                    pages = glue.get_paginator("get_partitions").paginate(DatabaseName=name, TableName=table["Name"])
                    partitions = [
                        _subset(partition, ("Values", "StorageDescriptor", "Parameters"))
                        for partition_page in pages
                        for partition in partition_page["Partitions"]
                    ]
                    entry["tables"].append(
                        {"input": _subset(table, TABLE_INPUT + TABLE_INPUT_MORE), "partitions": partitions}
                    )
            databases.append(entry)
    return databases


def _restore_catalog(deployment: Deployment, catalog: list[dict[str, Any]]) -> tuple[int, int]:
    """Databases and tables the deployment lacks are created; every table's partitions it lacks are added."""
    glue = deployment.client("glue")
    tables = partitions = 0
    for database in catalog:
        name = database["input"]["Name"]
        with suppress(glue.exceptions.AlreadyExistsException):  # made by the stacks, or ``default``
            glue.create_database(DatabaseInput=database["input"])
        for table in database["tables"]:
            try:
                glue.create_table(DatabaseName=name, TableInput=table["input"])
                tables += 1
            except glue.exceptions.AlreadyExistsException:
                pass  # the stacks' own table stays as the stacks make it
            kept = table["partitions"]
            for start in range(0, len(kept), BATCH_PARTITIONS):
                batch = kept[start : start + BATCH_PARTITIONS]
                answer = glue.batch_create_partition(
                    DatabaseName=name, TableName=table["input"]["Name"], PartitionInputList=batch
                )
                errors = answer.get("Errors", [])
                refused = [error for error in errors if error["ErrorDetail"]["ErrorCode"] != "AlreadyExistsException"]
                if refused:
                    detail = refused[0]["ErrorDetail"]
                    raise KeptStateError(
                        f"Glue refused a kept partition of {name}.{table['input']['Name']}: "
                        f"{detail['ErrorCode']}: {detail.get('ErrorMessage', '')}"
                    )
                partitions += len(batch) - len(errors)
    return tables, partitions


def _messages(deployment: Deployment, url: str) -> list[dict[str, Any]]:
    """The messages waiting in the queue at ``url``, read from moto's model: receiving them would count as
    a receive, and move a source queue's message towards its DLQ."""
    from moto.sqs.models import sqs_backends

    queue = sqs_backends[deployment.account][deployment.region].get_queue(url.rsplit("/", 1)[-1])
    kept = []
    for message in queue._messages:  # every message, received or not: the command is over
        attributes = {
            name: {key: value for key, value in attribute.items() if key in ("DataType", "StringValue", "BinaryValue")}
            for name, attribute in (message.message_attributes or {}).items()
        }
        kept.append({"body": message.body, "attributes": attributes})
    return kept


def _write_batch(dynamodb: Any, table: str, batch: list[dict[str, Any]]) -> None:
    pending = {table: batch}
    while pending:
        pending = dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}


def _subset(entry: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {name: entry[name] for name in names if name in entry}


def _encoded(value: Any) -> Any:
    """JSON-ready: bytes (a DynamoDB ``B`` value, an SQS binary attribute) as ``{"__bytes__": base64}``."""
    if isinstance(value, bytes | bytearray):
        return {"__bytes__": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, dict):
        return {key: _encoded(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set):
        return [_encoded(item) for item in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def _decoded(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__bytes__"}:
            return base64.b64decode(value["__bytes__"])
        return {key: _decoded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_decoded(item) for item in value]
    return value


@contextmanager
def _quiet() -> Iterator[None]:
    """No S3 event notification and no DynamoDB stream delivery while the state is put back."""
    from moto.dynamodb.models.table import StreamShard
    from moto.s3 import notifications

    send_event, add = notifications.send_event, StreamShard.add
    notifications.send_event = lambda *_args, **_kwargs: None
    StreamShard.add = lambda *_args, **_kwargs: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        notifications.send_event = send_event
        StreamShard.add = add  # type: ignore[method-assign]
