"""Hive type strings as the catalogs give them, read into trees the contract compares field by field."""

from __future__ import annotations

import pytest

from lakeline.errors import InvalidInputError
from stage_a.hive_types import HiveType, parse_hive_type


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("bigint", "bigint"),
        ("DECIMAL(12, 2)", "decimal(12,2)"),
        ("varchar(10)", "varchar(10)"),
        ("struct<city:string,zip:bigint>", "struct<city:string,zip:bigint>"),
        ("struct< city : string , zip : bigint >", "struct<city:string,zip:bigint>"),
        ("array<struct<sku:string,qty:int>>", "array<struct<sku:string,qty:int>>"),
        ("map<string,array<decimal(10,2)>>", "map<string,array<decimal(10,2)>>"),
        ("struct<`odd name`:int>", "struct<odd name:int>"),
    ],
)
def test_a_type_is_read_into_its_tree(text: str, written: str) -> None:
    assert str(parse_hive_type(text)) == written


def test_a_struct_keeps_its_field_names_and_a_map_its_key_and_value() -> None:
    kind = parse_hive_type("map<string,struct<a:int>>")
    assert kind == HiveType(
        "map", (("key", HiveType("string")), ("value", HiveType("struct", (("a", HiveType("int")),))))
    )


@pytest.mark.parametrize("text", ["struct<a:int", "array<int,int>", "map<string>", "struct<a int>", "int>", "a;b"])
def test_a_type_that_cannot_be_read_is_an_error_naming_it(text: str) -> None:
    with pytest.raises(InvalidInputError, match="type "):
        parse_hive_type(text)
