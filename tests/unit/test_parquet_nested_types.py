"""Parquet schemas Spark does not write, read as Spark and Athena read them (parquet-format
LogicalTypes.md, backward-compatibility rules): schema elements as a footer lists them, depth first."""

from __future__ import annotations

from stage_a.parquet_schema import _Element, _nested_type

INT32, REQUIRED, OPTIONAL, REPEATED, LIST = 1, 0, 1, 2, 3


def test_a_repeated_primitive_outside_a_list_is_an_array_of_it() -> None:
    ids = _Element(name="ids", physical=INT32, repetition=REPEATED)
    assert _nested_type([ids], 0) == ("array<int>", 1)


def test_a_list_whose_repeated_group_is_itself_a_list_is_a_list_of_lists() -> None:
    elements = [
        _Element(name="l", children=1, converted=LIST, repetition=OPTIONAL),
        _Element(name="inner", children=1, converted=LIST, repetition=REPEATED),
        _Element(name="v", physical=INT32, repetition=REPEATED),
    ]
    assert _nested_type(elements, 0) == ("array<array<int>>", 3)


def test_a_repeated_group_outside_a_list_is_an_array_of_structs() -> None:
    elements = [
        _Element(name="lines", children=2, repetition=REPEATED),
        _Element(name="sku", physical=INT32, repetition=REQUIRED),
        _Element(name="qty", physical=INT32, repetition=OPTIONAL),
    ]
    assert _nested_type(elements, 0) == ("array<struct<sku:int,qty:int>>", 3)
