"""DynamoDB's attribute values, written and read with boto3's ``TypeSerializer`` and ``TypeDeserializer``
(not marshalled by hand), for code that talks to the low-level client."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

_SERIALIZER = TypeSerializer()
_DESERIALIZER = TypeDeserializer()


def attribute_values(**values: object) -> dict[str, AttributeValueTypeDef]:
    """Expression attribute values ``:name`` for ``name=value``: a float as the exact decimal of its text (a
    time), a set of strings as a string set (sorted, so a request is the same whatever the set's order)."""
    serialized: dict[str, AttributeValueTypeDef] = {}
    for name, value in values.items():
        if isinstance(value, float):
            value = Decimal(str(value))
        if isinstance(value, set | frozenset):
            serialized[f":{name}"] = {"SS": sorted(str(entry) for entry in value)}
        else:
            serialized[f":{name}"] = _SERIALIZER.serialize(value)
    return serialized


def item_values(item: Mapping[str, Any]) -> dict[str, Any]:
    """A low-level item as plain Python values (numbers as ``Decimal``, string sets as sets)."""
    return {name: _DESERIALIZER.deserialize(value) for name, value in item.items()}
