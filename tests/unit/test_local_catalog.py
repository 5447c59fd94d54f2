"""Every name of a raw file's schema, at any depth, is checked before it reaches DDL."""

from __future__ import annotations

import pytest
from pyspark.sql.types import ArrayType, DataType, LongType, MapType, StringType, StructField, StructType

from lakeline.errors import InvalidInputError
from lakeline.project.catalog import field_type_sql


def struct(**fields: DataType) -> StructType:
    return StructType([StructField(name, kind) for name, kind in fields.items()])


def test_nested_names_are_quoted_and_keep_their_case() -> None:
    kind = struct(
        userId=LongType(), tags=ArrayType(struct(k=LongType())), attrs=MapType(StringType(), struct(v=StringType()))
    )
    assert field_type_sql(kind, "info", "t/f.json") == (
        "struct<`userId`:bigint,`tags`:array<struct<`k`:bigint>>,`attrs`:map<string,struct<`v`:string>>>"
    )


@pytest.mark.parametrize(
    ("kind", "path", "name"),
    [
        (struct(**{"a`b": LongType()}), "info", "a`b"),
        (
            struct(**{"x:string>) USING json LOCATION '/etc' --": LongType()}),
            "info",
            "x:string>) USING json LOCATION '/etc' --",
        ),
        (ArrayType(struct(**{"first name": StringType()})), "info[]", "first name"),
        (MapType(StringType(), struct(**{"last-name": StringType()})), "info{value}", "last-name"),
        (struct(ok=struct(**{'say "hi"\nthen': LongType()})), "info.ok", 'say "hi"\nthen'),
    ],
)
def test_a_nested_name_that_is_not_an_identifier_is_refused_naming_the_file_and_the_path(
    kind: StructType | ArrayType | MapType, path: str, name: str
) -> None:
    with pytest.raises(InvalidInputError) as refused:
        field_type_sql(kind, "info", "t/f.json")
    message = str(refused.value)
    assert message.startswith(f"raw file t/f.json: field under {path} {name!r} is not a valid name")
    assert "\n" not in message
