"""DynamoDB access to the ``dependencies`` and ``dependencies-by-table`` tables.

The client and the table names are passed in (CLI options, or the Lambda's environment parsed at its
edge). Table names inside items are normalised lowercase ``database.table`` for reads and writes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from lakeline.aws.retry import Backoff
from lakeline.dependencies.graph import check_no_cycle
from lakeline.dependencies.model import (
    DependencyEdge,
    DependencyItem,
    DependencyItemError,
    InvalidEdge,
    normalise_table_name,
    parse_dependency_edge,
    parse_dependency_item,
)
from lakeline.dependencies.tables import BY_TARGET_INDEX, DependencyTableNames
from lakeline.errors import InvalidInputError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

DEFAULT_DEPENDENCIES_TABLE = DependencyTableNames.dependencies
DEFAULT_BY_TABLE_TABLE = DependencyTableNames.by_table
TRANSACTION_LIMIT = 100
BATCH_GET_LIMIT = 100
BATCH_WRITE_LIMIT = 25

# DynamoDB returns unprocessed batch entries when it throttles; botocore does not retry those.
UNPROCESSED_BACKOFF = Backoff(attempts=9, base_seconds=0.05, cap_seconds=2.0)

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def to_dynamodb(item: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _serializer.serialize(value) for key, value in item.items()}


def from_dynamodb(item: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _deserializer.deserialize(value) for key, value in item.items()}


def source_tables_of_image(image: Mapping[str, Any]) -> frozenset[str]:
    """The sources named in a stored item, read leniently: old images may predate validation.

    Only ``dependencies[].TableName`` is needed to delete an item's dependencies-by-table pairs, so an
    old image that fails full validation can still be cleaned up. Names that cannot be normalised
    cannot have been written as pairs, and are skipped.
    """
    sources: set[str] = set()
    entries = image.get("dependencies")
    for entry in entries if isinstance(entries, list) else []:
        name = entry.get("TableName") if isinstance(entry, Mapping) else None
        try:
            sources.add(normalise_table_name(name))
        except InvalidInputError:
            continue
    return frozenset(sources)


@dataclass
class DependencyStore:
    client: DynamoDBClient
    dependencies_table: str = DEFAULT_DEPENDENCIES_TABLE
    by_table_table: str = DEFAULT_BY_TABLE_TABLE
    unprocessed_backoff: Backoff = UNPROCESSED_BACKOFF

    # --- dependencies -------------------------------------------------------------------------------

    def get_item(self, dataset: str) -> DependencyItem | None:
        key = normalise_table_name(dataset, "dataset")
        response = self.client.get_item(
            TableName=self.dependencies_table, Key={"dataset": {"S": key}}, ConsistentRead=True
        )
        raw = response.get("Item")
        return parse_dependency_item(from_dynamodb(raw), f"dependency item {key}") if raw else None

    def put_items(self, items: Sequence[DependencyItem]) -> None:
        """Store validated items, refusing all of them if any would close a dependency cycle.

        The items are checked together, as if already stored, so a file whose items form a cycle
        among themselves is refused too, and nothing is written.
        """
        pending = {item.dataset: frozenset(item.source_tables) for item in items}
        if len(pending) != len(items):
            raise InvalidInputError("the same dataset is given more than once")

        def upstream(datasets: Collection[str]) -> dict[str, frozenset[str]]:
            stored = self.upstream_sources([name for name in datasets if name not in pending])
            return {**stored, **{name: pending[name] for name in datasets if name in pending}}

        for item in items:
            check_no_cycle(item.dataset, item.source_tables, upstream)
        # One transaction, so a file of items is stored whole or not at all (up to 100 items).
        actions: list[TransactWriteItemTypeDef] = [
            {"Put": {"TableName": self.dependencies_table, "Item": to_dynamodb(item.to_item())}} for item in items
        ]
        for start in range(0, len(actions), TRANSACTION_LIMIT):
            self.client.transact_write_items(TransactItems=actions[start : start + TRANSACTION_LIMIT])

    def scan_items(self) -> Iterator[dict[str, Any]]:
        """Every stored item as plain Python values (numbers as Decimal), unvalidated."""
        paginator = self.client.get_paginator("scan")
        for page in paginator.paginate(TableName=self.dependencies_table, ConsistentRead=True):
            for raw in page.get("Items", []):
                yield from_dynamodb(raw)

    def upstream_sources(self, datasets: Collection[str]) -> dict[str, frozenset[str]]:
        """What each of ``datasets`` needs, by BatchGetItem on the dependencies table (never a scan)."""
        wanted = sorted(set(datasets))
        found: dict[str, frozenset[str]] = {}
        for start in range(0, len(wanted), BATCH_GET_LIMIT):
            keys: list[dict[str, Any]] = [{"dataset": {"S": name}} for name in wanted[start : start + BATCH_GET_LIMIT]]
            request: dict[str, Any] = {
                self.dependencies_table: {
                    "Keys": keys,
                    "ProjectionExpression": "dataset, dependencies",
                    "ConsistentRead": True,
                }
            }
            retry = 0
            while request:
                response = self.client.batch_get_item(RequestItems=request)
                for raw in response.get("Responses", {}).get(self.dependencies_table, []):
                    image = from_dynamodb(raw)
                    found[str(image["dataset"])] = source_tables_of_image(image)
                request = dict(response.get("UnprocessedKeys") or {})
                if request:
                    retry += 1
                    self.unprocessed_backoff.before_retry(
                        retry, f"reading {self.dependencies_table} (DynamoDB left keys unprocessed)"
                    )
        return found

    # --- dependencies-by-table ---------------------------------------------------------------------

    def edges_from(self, source_table: str) -> list[DependencyEdge | InvalidEdge]:
        """The targets a finished table triggers: one Query on its partition key, validated on read. A pair
        that does not validate is returned as an ``InvalidEdge``, so it fails its own target only."""
        source = normalise_table_name(source_table, "source table")
        edges: list[DependencyEdge | InvalidEdge] = []
        paginator = self.client.get_paginator("query")
        pages = paginator.paginate(
            TableName=self.by_table_table,
            KeyConditionExpression="source_table = :source",
            ExpressionAttributeValues={":source": {"S": source}},
            ConsistentRead=True,
        )
        for page in pages:
            for raw in page.get("Items", []):
                try:
                    edges.append(parse_dependency_edge(from_dynamodb(raw)))
                except DependencyItemError as error:
                    target = raw.get("target_dataset", {}).get("S", "?")
                    edges.append(InvalidEdge(source, target, "; ".join(error.problems)))
        return edges

    def sources_of_target(self, target_dataset: str) -> frozenset[str]:
        """The sources that have a pair for ``target_dataset`` (Query on the keys-only by-target index)."""
        paginator = self.client.get_paginator("query")
        pages = paginator.paginate(
            TableName=self.by_table_table,
            IndexName=BY_TARGET_INDEX,
            KeyConditionExpression="target_dataset = :target",
            ExpressionAttributeValues={":target": {"S": target_dataset}},
        )
        return frozenset(raw["source_table"]["S"] for page in pages for raw in page.get("Items", []))

    def edge_keys(self) -> Iterator[tuple[str, str]]:
        """Every (source_table, target_dataset) pair stored, for backfill."""
        paginator = self.client.get_paginator("scan")
        pages = paginator.paginate(
            TableName=self.by_table_table,
            ProjectionExpression="source_table, target_dataset",
            ConsistentRead=True,
        )
        for page in pages:
            for raw in page.get("Items", []):
                yield raw["source_table"]["S"], raw["target_dataset"]["S"]

    def replace_edges(self, puts: Sequence[DependencyEdge], deletes: Collection[tuple[str, str]]) -> None:
        """Write and delete pairs in one transaction, so one item's change is applied whole or not at all.

        An item has at most MAX_SOURCES (50) sources, so its puts and deletes fit one transaction; only
        an old image written before validation could need more, and then the chunks are applied in
        order (puts first) and a retry re-applies them idempotently.
        """
        actions: list[TransactWriteItemTypeDef] = [
            {"Put": {"TableName": self.by_table_table, "Item": to_dynamodb(edge.to_item())}} for edge in puts
        ]
        actions.extend(
            {
                "Delete": {
                    "TableName": self.by_table_table,
                    "Key": {"source_table": {"S": source}, "target_dataset": {"S": target}},
                }
            }
            for source, target in sorted(deletes)
        )
        for start in range(0, len(actions), TRANSACTION_LIMIT):
            self.client.transact_write_items(TransactItems=actions[start : start + TRANSACTION_LIMIT])

    def batch_write_edges(self, puts: Sequence[DependencyEdge], deletes: Collection[tuple[str, str]]) -> None:
        """Bulk writes for backfill (BatchWriteItem, retrying unprocessed items)."""
        requests: list[dict[str, Any]] = [{"PutRequest": {"Item": to_dynamodb(edge.to_item())}} for edge in puts]
        requests.extend(
            {"DeleteRequest": {"Key": {"source_table": {"S": s}, "target_dataset": {"S": t}}}}
            for s, t in sorted(deletes)
        )
        for start in range(0, len(requests), BATCH_WRITE_LIMIT):
            pending: dict[str, Any] = {self.by_table_table: requests[start : start + BATCH_WRITE_LIMIT]}
            retry = 0
            while pending:
                response = self.client.batch_write_item(RequestItems=pending)
                pending = dict(response.get("UnprocessedItems") or {})
                if pending:
                    retry += 1
                    self.unprocessed_backoff.before_retry(
                        retry, f"writing {self.by_table_table} (DynamoDB left items unprocessed)"
                    )
