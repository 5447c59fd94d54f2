"""A bound on a stage's executions in flight (#39, back-pressure instead of bulk parking).

A backfill across hundreds of partitions used to start hundreds of executions in seconds: Athena allows ~20-25
DML queries at once and Glue ~20 concurrent job runs, so most of them were throttled past their retries and their
arrivals parked in bulk. Now a run takes one of its stage's slots before its execution starts and gives it back
when the run ends (``LeasedRunEnd``: its post-update, its failure function, the status-change function of an
execution that ended outside its Catch), or passes it to the follow-up run its end hands the partition's lease to
(``hand_over``): a partition with arrivals waiting keeps its slot until they are all taken, instead of queueing
behind partitions that hold none (the scale benchmark's burst follow-up waited 155 turns of the queue behind 100
partitions). A run that finds none free keeps its partition's lease and its router sends its message back to the
queue with a delay (``NoRunSlot``): it starts when a slot is free.

The slots live in the pipeline-state table, in one counter item per stage, ``slots#<stage>``: ``in_flight`` and
``held``, a map of each holding run's token to when its slot expires, changed together by one conditional update,
so the count is exact: taking a slot a run holds already (a redelivery, a retried start) changes nothing, and so
does giving back one it gave back. A slot whose run never ends it (a function that failed for good) expires with
the run's lease; the stranded sweep gives such slots back (``release_expired``), reading that one item: the map
holds at most ``limit`` entries, where a scan of the table for them grew with every partition it holds.

Before, each held slot was an item of its own, ``slot#<stage>#<run token>``, found by scanning the whole table.
Such items (written before this version) are still given back by their run's end; the sweep looks for expired ones
by the old scan only while any may be left: until two leases after the counter first got its map (``legacy_until``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from lakeline.aws.dynamodb import attribute_values, item_values
from lakeline.errors import LakelineError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

    from lakeline.aws.stepfunctions import ExecutionStart

STAGES = ("a", "b")
SLOTS_PREFIX = "slots#"
SLOT_PREFIX = "slot#"  # a held slot's own item, before the counter's map (``held``)
HELD = "held"
DEFAULT_RUNS_IN_FLIGHT = 20
"""Executions in flight per stage: Athena's default DML quota (~20-25 active queries per account and region, each
run has one at a time) and Glue's 20 concurrent job runs."""


class NoRunSlot(LakelineError):
    """As many of the stage's runs are in flight as it allows: this one waits for one of them to end."""


def _cancelled(error: ClientError) -> list[str]:
    """The reasons DynamoDB gives, in order, for a cancelled transaction (empty: another error)."""
    if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
        return []
    reasons: list[Any] = list(error.response.get("CancellationReasons", []))
    return [str(reason.get("Code", "None")) for reason in reasons] or ["Unknown"]


@dataclass
class RunSlots:
    """The slots of one stage (``stage``: ``a`` or ``b``) in the pipeline-state table."""

    client: DynamoDBClient
    table_name: str
    stage: str
    limit: int = DEFAULT_RUNS_IN_FLIGHT
    lease_seconds: float = 7 * 60 * 60  # as a partition's lease: longer than a run may take
    clock: Callable[[], float] = field(default=time.time)
    key_attribute: str = "target_partition"

    def _key(self, name: str) -> dict[str, Any]:
        return {self.key_attribute: {"S": name}}

    @property
    def counter(self) -> str:
        return f"{SLOTS_PREFIX}{self.stage}"

    def slot(self, token: str) -> str:
        return f"{SLOT_PREFIX}{self.stage}#{token}"

    def expiry(self) -> float:
        return self.clock() + self.lease_seconds

    def _counter_update(self, expression: str, condition: str, **values: object) -> bool:
        """One conditional update of the counter item (``#held.#run`` names the run's entry, ``#held.#next`` the
        entry of its follow-up run if ``follow_up`` is given); False if its condition does not hold, or the counter
        has no map yet (an item from before, or none)."""
        names = {"#held": HELD, "#run": str(values.pop("token"))}
        if "follow_up" in values:
            names["#next"] = str(values.pop("follow_up"))
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=self._key(self.counter),
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=attribute_values(**values),
            )
        except ClientError as error:
            found = error.response.get("Error", {})
            # An entry cannot be set in a map that does not exist: DynamoDB says the document path is invalid.
            no_map = found.get("Code") == "ValidationException" and "document path" in found.get("Message", "")
            if found.get("Code") == "ConditionalCheckFailedException" or no_map:
                return False
            raise
        return True

    def _counter_item(self) -> dict[str, Any]:
        found = self.client.get_item(TableName=self.table_name, Key=self._key(self.counter), ConsistentRead=True)
        return dict(item_values(found.get("Item", {})))

    def _start_map(self, counter: dict[str, Any]) -> None:
        """Give the counter its map of held slots. A counter from before (``in_flight`` counted slot items of their
        own) notes until when such an item may still be live, for the sweep."""
        values: dict[str, object] = {"empty": {}}
        expression = "SET #held = :empty"
        if counter.get("in_flight"):
            values["until"] = self.clock() + 2 * self.lease_seconds
            expression += ", legacy_until = :until"
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=self._key(self.counter),
                UpdateExpression=expression,
                ConditionExpression="attribute_not_exists(#held)",
                ExpressionAttributeNames={"#held": HELD},
                ExpressionAttributeValues=attribute_values(**values),
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise  # another router gave it its map meanwhile: nothing to do

    def take(self, token: str) -> None:
        """Take a slot for run ``token`` (nothing if it holds one); ``NoRunSlot`` if none is free."""
        for _ in range(2):
            if self._counter_update(
                "SET #held.#run = :expires ADD in_flight :one",
                "attribute_exists(#held) AND attribute_not_exists(#held.#run) "
                "AND (attribute_not_exists(in_flight) OR in_flight < :limit)",
                token=token,
                expires=self.expiry(),
                one=1,
                limit=self.limit,
            ):
                return
            counter = self._counter_item()
            if HELD not in counter:
                self._start_map(counter)
                continue
            if token in counter[HELD]:
                return  # the run holds a slot already
            break
        raise NoRunSlot(
            f"stage {self.stage.upper()}: {self.limit} runs are in flight, as many as it allows; run {token} "
            "starts when one of them ends"
        )

    def hand_over(self, token: str, follow_up: str) -> bool:
        """Pass run ``token``'s slot to its follow-up run ``follow_up`` (it holds its partition's lease next), so the
        follow-up starts without waiting for a slot behind runs of partitions that hold none; False if ``token``
        held no slot in the map (handed over already, given back, or an item of its own: the follow-up then takes
        one as any run does). The count does not change."""
        return self._counter_update(
            "REMOVE #held.#run SET #held.#next = :expires",
            "attribute_exists(#held.#run) AND attribute_not_exists(#held.#next)",
            token=token,
            follow_up=follow_up,
            expires=self.expiry(),
        )

    def release(self, token: str) -> bool:
        """Give back run ``token``'s slot; False if it held none (given back already, or never taken)."""
        if self._counter_update(
            "REMOVE #held.#run ADD in_flight :minus", "attribute_exists(#held.#run)", token=token, minus=-1
        ):
            return True
        return self._release_item(token)

    def _release_item(self, token: str) -> bool:
        """Give back a slot taken before the counter's map: an item of its own, deleted with the count's decrement."""
        actions: list[TransactWriteItemTypeDef] = [
            {
                "Delete": {
                    "TableName": self.table_name,
                    "Key": self._key(self.slot(token)),
                    "ConditionExpression": "attribute_exists(#key)",
                    "ExpressionAttributeNames": {"#key": self.key_attribute},
                }
            },
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": self._key(self.counter),
                    "UpdateExpression": "ADD in_flight :minus",
                    "ExpressionAttributeValues": attribute_values(minus=-1),
                }
            },
        ]
        try:
            self.client.transact_write_items(TransactItems=actions)
        except ClientError as error:
            if _cancelled(error)[:1] == ["ConditionalCheckFailed"]:
                return False
            raise
        return True

    def in_flight(self) -> int:
        return int(self._counter_item().get("in_flight", 0))

    def release_expired(self) -> list[str]:
        """Give back the slots whose runs outlived their lease without ending them; their run tokens."""
        now = self.clock()
        counter = self._counter_item()
        expired = [
            token
            for token, expires in sorted(dict(counter.get(HELD) or {}).items())
            if float(expires) < now
            and self._counter_update(
                "REMOVE #held.#run ADD in_flight :minus", "#held.#run < :now", token=token, minus=-1, now=now
            )
        ]
        legacy = HELD not in counter or float(counter.get("legacy_until", 0)) >= now
        if legacy and counter.get("in_flight"):
            expired += self._release_expired_items(now)
        return expired

    def _release_expired_items(self, now: float) -> list[str]:
        """The slot items from before the counter's map whose runs outlived their lease, given back (a scan of the
        table: only while such items may be left)."""
        prefix = f"{SLOT_PREFIX}{self.stage}#"
        expired: list[str] = []
        for page in self.client.get_paginator("scan").paginate(
            TableName=self.table_name,
            FilterExpression="begins_with(#key, :prefix) AND expires < :now",
            ExpressionAttributeNames={"#key": self.key_attribute},
            ExpressionAttributeValues=attribute_values(prefix=prefix, now=now),
            ConsistentRead=True,
        ):
            for item in page.get("Items", []):
                token = item[self.key_attribute]["S"].removeprefix(prefix)
                if self._release_item(token):
                    expired.append(token)
        return expired


def start_in_slot(slots: RunSlots | None, token: str, start: Callable[[], ExecutionStart]) -> ExecutionStart:
    """Start run ``token``'s execution (``start``) once it holds one of ``slots`` (none: no bound). A run found
    ended already (a redelivery after its end, which ended its slot) does not keep the slot it took again."""
    if slots is None:
        return start()
    slots.take(token)
    started = start()
    if started.ended:
        slots.release(token)
    return started
