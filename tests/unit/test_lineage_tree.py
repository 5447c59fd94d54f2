"""Rebuilding a root's tree: one line per leaf, statuses, cycles and missing parents, nothing dropped."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from lakeline.lineage.records.tree import LineageNode, LineageTree, build_tree

ROOT = "root-1"


def node(node_id: str, parent_id: str, action: str = "STEP", recorded_at: int = 0) -> LineageNode:
    return LineageNode(
        root_id=ROOT,
        node_id=node_id,
        parent_id=parent_id,
        action_taken=action,
        storage_location=f"s3://bucket/{node_id}",
        recorded_at=recorded_at,
    )


def lines_of(tree: LineageTree) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {line.record_id: (line.status, line.path) for line in tree.lines}


def test_a_fan_out_gives_one_complete_line_per_leaf_in_lineage_order() -> None:
    nodes = [
        node("c1", "split", "CALCULATION_COMPLETE"),
        node("raw", ROOT, "RAW_DATA_INPUT"),
        node("split", "dq", "GLUE_BATCH_SPLIT"),
        node("dq", "raw", "DQ_CHECK_PASS"),
        node("c2", "split", "CALCULATION_COMPLETE"),
    ]
    tree = build_tree(ROOT, nodes)
    assert lines_of(tree) == {
        "c1": ("complete", ("raw", "dq", "split", "c1")),
        "c2": ("complete", ("raw", "dq", "split", "c2")),
    }
    assert [n.node_id for n, _ in tree.walk()] == ["raw", "dq", "split", "c1", "c2"]
    assert [depth for _, depth in tree.walk()] == [0, 1, 2, 3, 3]


def test_a_run_that_stopped_early_is_unterminated_not_dropped() -> None:
    tree = build_tree(ROOT, [node("raw", ROOT, "RAW_DATA_INPUT"), node("dq", "raw", "DQ_CHECK_PASS")])
    assert lines_of(tree) == {"dq": ("unterminated", ("raw", "dq"))}


def test_nodes_whose_parent_is_gone_are_archived_as_missing_parent() -> None:
    nodes = [
        node("raw", ROOT, "RAW_DATA_INPUT"),
        node("done", "raw", "STAGE_A_COMPLETE"),
        node("orphan", "expired-node", "PROFILE_COMPLETE"),
        node("orphan-child", "orphan", "CALCULATION_COMPLETE"),
    ]
    tree = build_tree(ROOT, nodes)
    assert lines_of(tree) == {
        "done": ("complete", ("raw", "done")),
        "orphan-child": ("missing_parent", ("orphan", "orphan-child")),
    }


def test_cycles_end_and_are_cut_at_their_earliest_node() -> None:
    nodes = [
        node("a", "c", recorded_at=30),
        node("b", "a", recorded_at=10),
        node("c", "b", recorded_at=20),
        node("hanging", "c", "CALCULATION_COMPLETE", recorded_at=40),
        node("self", "self", recorded_at=5),
    ]
    tree = build_tree(ROOT, nodes)
    assert lines_of(tree) == {
        "a": ("cycle", ("b", "c", "a")),
        "hanging": ("cycle", ("b", "c", "hanging")),
        "self": ("cycle", ("self",)),
    }


def test_later_duplicates_of_a_node_win() -> None:
    tree = build_tree(ROOT, [node("raw", ROOT, "STEP"), node("raw", ROOT, "STAGE_A_COMPLETE")])
    assert lines_of(tree) == {"raw": ("complete", ("raw",))}


def test_a_chain_of_100000_steps_needs_no_recursion_and_little_time() -> None:
    count = 100_000
    nodes = [node("n0", ROOT)] + [node(f"n{i}", f"n{i - 1}") for i in range(1, count)]
    started = time.perf_counter()
    tree = build_tree(ROOT, reversed(nodes))
    elapsed = time.perf_counter() - started
    [line] = tree.lines
    assert line.record_id == f"n{count - 1}"
    assert line.path[0] == "n0" and len(line.path) == count
    assert elapsed < 5  # linear: well under a second on a laptop; quadratic would take minutes


@st.composite
def forests(draw: st.DrawFn) -> list[LineageNode]:
    """Any parent links: the root, another node (cycles allowed), or a node that is not there."""
    size = draw(st.integers(min_value=0, max_value=40))
    ids = [f"n{i}" for i in range(size)]
    parents = st.sampled_from([ROOT, "gone-1", "gone-2", *ids]) if ids else st.just(ROOT)
    actions = st.sampled_from(["STEP", "CALCULATION_COMPLETE"])
    return [node(i, draw(parents), draw(actions), draw(st.integers(0, 5))) for i in ids]


@settings(max_examples=300, deadline=None)
@given(forests())
def test_every_node_is_on_a_line_and_every_line_follows_parent_links(nodes: list[LineageNode]) -> None:
    tree = build_tree(ROOT, nodes)
    by_id = {n.node_id: n for n in nodes}
    on_lines = {node_id for line in tree.lines for node_id in line.path}
    assert on_lines == set(by_id)
    has_children = {child_parent for child_parent in (n.parent_id for n in nodes)}
    for line in tree.lines:
        assert line.record_id == line.path[-1]
        for parent, child in zip(line.path, line.path[1:], strict=False):
            assert by_id[child].parent_id == parent
        top = by_id[line.path[0]]
        if line.status == "missing_parent":
            assert top.parent_id not in by_id and top.parent_id != ROOT
        elif line.status == "cycle":
            assert top.parent_id in by_id
        else:
            assert top.parent_id == ROOT
            assert (line.status == "complete") == (by_id[line.record_id].action_taken == "CALCULATION_COMPLETE")
        if line.status != "cycle":
            assert line.record_id not in has_children
