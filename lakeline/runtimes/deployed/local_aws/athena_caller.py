"""What Athena does with its caller's credentials, checked by the local Athena endpoint (#20).

Athena reads and writes the Glue Data Catalog and S3 as the principal that started the query: a state
machine whose role may start queries but not read a table's Glue entry, or not write where a CTAS or an
INSERT puts its files, or not write the query's result file, has its query fail in AWS. moto authorizes the
``StartQueryExecution`` call alone; ``required`` lists what the statement needs besides, and ``authorize``
checks each against the caller's policies (evaluated by moto's IAM, with the rehearsal's fixes, ``iam``):

- each table it names that Glue has: ``glue:GetTable`` (and ``GetPartitions`` for a partitioned one) on the
  catalog, its database and the table; its data: ``s3:ListBucket`` on the bucket, ``s3:GetObject`` under
  its location, and the same for each partition located outside it (every such partition, not only those
  the query's filter keeps: stricter than Athena, which checks the partitions it reads);
- a table it creates: ``glue:CreateTable``; drops: ``glue:DeleteTable``; alters: ``glue:UpdateTable``, a
  partition's: ``glue:UpdatePartition``; adds partitions (``ADD PARTITION``, ``MSCK REPAIR``, an INSERT into
  a partitioned table): ``glue:BatchCreatePartition``; drops them: ``glue:BatchDeletePartition``; with
  ``glue:GetTable`` for each table it changes that exists; writes (CTAS, INSERT): ``s3:PutObject`` under
  the location written;
- its result file: ``s3:PutObject`` on ``<output>/<id>.csv`` (``.txt`` for DDL).

A refusal fails the query with Athena's kind of reason (``Access denied when writing to location: ...``,
``... is not authorized to perform: glue:GetTable on resource: ...``). Gaps: KMS (the data key's use) and
Lake Formation are not checked, nor the caller's rights on databases it creates or drops.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakeline.errors import LakelineError
from lakeline.runtimes.deployed.local_aws.athena_answers import glue_definition
from lakeline.runtimes.deployed.local_aws.iam import permitted

if TYPE_CHECKING:
    from lakeline.runtimes.deployed.local_aws.athena_statements import Statement

CREDENTIAL = re.compile(r"Credential=(?P<key>[^/,\s]+)/")


@dataclass(frozen=True)
class Caller:
    """Who started a query: the access key that signed ``StartQueryExecution`` (and its session token, if it
    is temporary)."""

    access_key_id: str
    session_token: str | None


@dataclass(frozen=True)
class Needed:
    action: str
    resources: tuple[str, ...]
    refusal: str  # the query's failure reason if refused ("is not authorized": AWS's, with the principal)


class AccessDenied(LakelineError):
    """Athena could not do what the query needs with the caller's credentials."""


def caller_of(headers: Any) -> Caller | None:
    """The signer of a request, from its headers (``None``: not signed, as before IAM is enforced)."""
    found = CREDENTIAL.search(str(headers.get("Authorization", "")))
    if found is None:
        return None
    token = headers.get("X-Amz-Security-Token")
    return Caller(found.group("key"), str(token) if token else None)


def s3_object(uri: str) -> str:
    """``s3://bucket/key`` as an S3 object ARN (``*`` stands for every key under a folder)."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return f"arn:aws:s3:::{bucket}/{key}"


def s3_bucket(uri: str) -> str:
    return f"arn:aws:s3:::{uri.removeprefix('s3://').partition('/')[0]}"


def glue_table(region: str, account: str, database: str, table: str) -> tuple[str, ...]:
    prefix = f"arn:aws:glue:{region}:{account}"
    return (f"{prefix}:catalog", f"{prefix}:database/{database}", f"{prefix}:table/{database}/{table}")


def reading(
    region: str,
    account: str,
    database: str,
    table: str,
    location: str | None,
    partitioned: bool,
    elsewhere: Iterable[str] = (),
) -> list[Needed]:
    """What reading a table Glue has needs; ``elsewhere``: the locations of its partitions outside ``location``
    (Athena reads each partition where Glue says it is, so each is checked as the table's own folder is)."""
    arns = glue_table(region, account, database, table)
    refusal = "is not authorized"  # completed by ``authorize`` with the action and resource refused
    needed = [Needed("glue:GetTable", arns, refusal)]
    if partitioned:
        needed.append(Needed("glue:GetPartitions", arns, refusal))
    folders = [uri.rstrip("/") + "/" for uri in ([location] if location else []) + sorted(set(elsewhere))]
    for folder in dict.fromkeys(folders):
        denied = f"Permission denied on S3 path: {folder}"
        needed += [
            Needed("s3:ListBucket", (s3_bucket(folder),), denied),
            Needed("s3:GetObject", (s3_object(folder + "*"),), denied),
        ]
    return needed


def changing(region: str, account: str, database: str, table: str, actions: tuple[str, ...]) -> list[Needed]:
    """What creating, dropping or altering a table's Glue entry needs."""
    arns = glue_table(region, account, database, table)
    return [Needed(action, arns, "is not authorized") for action in actions]


def writing(location: str) -> Needed:
    """What writing files under ``location`` needs (a CTAS's or an INSERT's)."""
    folder = location.rstrip("/") + "/"
    return Needed("s3:PutObject", (s3_object(folder + "*"),), f"Access denied when writing to location: {folder}")


def result_file(uri: str) -> Needed:
    return Needed(
        "s3:PutObject",
        (s3_object(uri),),
        f"Access denied when writing output to url: {uri} . Please ensure you are allowed to run 's3:PutObject' "
        "requests against the location",
    )


def authorize(account: str, region: str, caller: Caller, needed: list[Needed]) -> None:
    """Raise ``AccessDenied`` with the first refusal's reason, if the caller's policies refuse anything."""
    from moto.iam.access_control import CreateAccessKeyFailure, create_access_key

    headers = {"X-Amz-Security-Token": caller.session_token} if caller.session_token else {}
    try:
        key = create_access_key(account, "aws", caller.access_key_id, headers)
    except CreateAccessKeyFailure as failure:
        raise AccessDenied(f"the credentials that started the query are not valid ({failure.reason})") from failure
    policies = key.collect_policies()
    for need in needed:
        for resource in need.resources:
            if not permitted(policies, need.action, resource):
                reason = need.refusal
                if reason.startswith("is not authorized"):
                    reason = f"User: {key.arn} is not authorized to perform: {need.action} on resource: {resource}"
                raise AccessDenied(reason)


def iam_enforced() -> bool:
    from moto import settings

    return bool(settings.INITIAL_NO_AUTH_ACTION_COUNT == 0)


def needed_for(glue: Any, statement: Statement, region: str, account: str, output: str) -> list[Needed]:
    """What the statement makes Athena do with its caller's credentials (``athena_caller``)."""
    needed: list[Needed] = []
    changes = {
        "ctas": ("glue:CreateTable",),
        "create": ("glue:CreateTable",),
        "drop": ("glue:GetTable", "glue:DeleteTable"),
        "alter": ("glue:GetTable", "glue:UpdateTable"),
        "alter_partition": ("glue:GetTable", "glue:UpdatePartition"),
        "add_partition": ("glue:GetTable", "glue:BatchCreatePartition"),
        "drop_partition": ("glue:GetTable", "glue:BatchDeletePartition"),
        "insert": ("glue:GetTable",),
    }.get(statement.kind, ())
    for database, table in sorted(statement.tables):
        found = glue.databases.get(database)
        entry = found.tables.get(table) if found is not None else None
        definition = glue_definition(entry) if entry is not None else {}
        location = definition.get("StorageDescriptor", {}).get("Location")
        partitioned = bool(definition.get("PartitionKeys"))
        if (database, table) in statement.changes:
            # A table that is not there is only looked up (DROP TABLE IF EXISTS of a missing one).
            actions = changes if entry is not None or statement.kind in ("ctas", "create") else ("glue:GetTable",)
            if statement.kind == "insert" and partitioned:
                actions = (*actions, "glue:BatchCreatePartition")
            needed += changing(region, account, database, table, actions)
            if statement.kind == "insert" and location:
                needed.append(writing(location))
        elif entry is not None:
            # A projected table's partitions are computed, not read from Glue.
            projected = definition.get("Parameters", {}).get("projection.enabled") == "true"
            elsewhere = _partitions_outside(entry, location) if partitioned and not projected else set()
            needed += reading(region, account, database, table, location, partitioned and not projected, elsewhere)
    if statement.kind == "ctas" and statement.writes_to:
        needed.append(writing(statement.writes_to))
    needed.append(result_file(output))
    return needed


def _partitions_outside(entry: Any, location: str | None) -> set[str]:
    """The locations of the table's partitions that are not under its own ``location``: a partition may be
    anywhere (``ADD PARTITION ... LOCATION``), and Athena reads it there with the caller's credentials."""
    folder = location.rstrip("/") + "/" if location else None
    found = {
        str(p.partition_input.get("StorageDescriptor", {}).get("Location") or "") for p in entry.partitions.values()
    }
    return {uri for uri in found if uri and (folder is None or not (uri.rstrip("/") + "/").startswith(folder))}
