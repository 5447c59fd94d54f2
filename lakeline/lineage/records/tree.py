"""Rebuild one root's lineage tree from ``parent_id`` links, in time linear in the number of nodes.

Every node has exactly one parent: the root itself (``parent_id == root_id``: the first step of a
run), another node, or an id that is not there. The tree is built in one pass that indexes children,
one iterative depth-first walk from the tops (no recursion, so a 100,000-step chain is fine), and one
pass over whatever the walk did not reach, which can only be cycles and what hangs from them.

Each leaf becomes one archive line: its path from its top down to the leaf. A line's status is

- ``cycle``           its part of the tree loops back on itself (the loop is cut at its earliest node);
- ``missing_parent``  its top names a parent that is not in the table (expired or never loaded);
- ``unterminated``    the path is whole but the leaf's action is not a terminal one;
- ``complete``        otherwise.

The first two take precedence over ``unterminated``. Nothing is dropped: every node appears on at
least one line. Siblings keep their input order (the lineage table returns them by ``node_id``), so
the same nodes always give the same lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal, NamedTuple

from lakeline.errors import InvalidInputError
from lakeline.lineage.records.model import DEFAULT_TERMINAL_ACTIONS, LineageRecord

Status = Literal["complete", "missing_parent", "cycle", "unterminated", "expired"]
TreeProblem = Literal["missing_parent", "cycle"]
STATUSES: tuple[Status, ...] = ("complete", "missing_parent", "cycle", "unterminated", "expired")


class LineageNode(NamedTuple):
    """A lineage record inside the trace: plain values, no validation cost per node.

    A named tuple, not a dataclass: a 100,000-node trace creates 100,000 of them, and a tuple is
    built several times faster than a frozen dataclass.
    """

    root_id: str
    node_id: str
    parent_id: str
    action_taken: str
    storage_location: str
    recorded_at: int
    ttl_expiry: int | None = None
    run_id: str | None = None
    job_name: str | None = None
    dataset: str | None = None
    version: str | None = None  # the partition version token of a run's output (``lakeline.commits.versions``)

    @classmethod
    def from_record(cls, record: LineageRecord) -> LineageNode:
        return cls(
            record.root_id,
            record.node_id,
            record.parent_id,
            record.action_taken,
            record.storage_location,
            record.recorded_at,
            record.ttl_expiry,
            record.run_id,
            record.job_name,
            record.dataset,
            record.version,
        )

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> LineageNode:
        """From a plain or DynamoDB-deserialized item (numbers may be ``Decimal``).

        Only the keys are required; an item written by something other than the loader still gets
        archived, with empty text where a field is missing (an empty parent reads as a missing one).
        """
        get = values.get
        root_id, node_id = get("root_id"), get("node_id")
        if not isinstance(root_id, str) or not isinstance(node_id, str):
            raise InvalidInputError(f"lineage item without root_id/node_id keys: {dict(values)!r:.200}")
        return cls.from_attributes(root_id, node_id, get, text_value, integer_value)

    @classmethod
    def from_attributes(
        cls,
        root_id: str,
        node_id: str,
        get: Callable[[str], Any],
        text: Callable[[Any], str | None],
        integer: Callable[[Any], int | None],
    ) -> LineageNode:
        """From an item's keys and its other attributes, each read by ``get`` under the item's attribute
        name and converted by ``text`` or ``integer`` (plain values, or DynamoDB's typed attributes)."""
        return cls(
            root_id,
            node_id,
            text(get("parent_id")) or "",
            text(get("action_taken")) or "",
            text(get("storage_location")) or "",
            integer(get("recordedAt")) or 0,
            integer(get("ttl_expiry")),
            text(get("run_id")),
            text(get("job_name")),
            text(get("dataset")),
            text(get("version")),
        )

    def archive_dict(self) -> dict[str, Any]:
        """The element of an archive line's ``lineage`` array: the seed's record fields."""
        data: dict[str, Any] = {
            "root_id": self.root_id,
            "node_id": self.node_id,
            "parent_id": self.parent_id,
            "action_taken": self.action_taken,
            "storage_location": self.storage_location,
            "recordedAt": self.recorded_at,
        }
        if self.ttl_expiry is not None:
            data["ttl_expiry"] = self.ttl_expiry
        if self.run_id is not None:
            data["run_id"] = self.run_id
        if self.job_name is not None:
            data["job_name"] = self.job_name
        if self.dataset is not None:
            data["dataset"] = self.dataset
        if self.version is not None:
            data["version"] = self.version
        return data


def text_value(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def integer_value(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | Decimal | float):
        return int(value)
    if isinstance(value, str):
        try:
            return int(Decimal(value))
        except ArithmeticError:
            return None
    return None


class TraceLine(NamedTuple):
    """One archive line before rendering: the leaf (``record_id``) and its path, top first."""

    record_id: str
    status: Status
    path: tuple[str, ...]


@dataclass
class LineageTree:
    """The rebuilt tree. ``tops`` maps each top (a node hanging from the root, from a missing parent,
    or where a cycle was cut) to its problem; ``preorder`` lists the nodes depth first, ``depths``
    their depth below their top."""

    root_id: str
    nodes: dict[str, LineageNode]
    tops: dict[str, TreeProblem | None] = field(default_factory=dict)
    preorder: list[str] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)
    lines: list[TraceLine] = field(default_factory=list)

    def walk(self) -> Iterator[tuple[LineageNode, int]]:
        """Every node with its depth below its top, in depth-first order."""
        for node_id, depth in zip(self.preorder, self.depths, strict=True):
            yield self.nodes[node_id], depth

    def status_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for line in self.lines:
            counts[line.status] = counts.get(line.status, 0) + 1
        return counts


def build_tree(
    root_id: str,
    nodes: Iterable[LineageNode],
    terminal_actions: frozenset[str] = DEFAULT_TERMINAL_ACTIONS,
) -> LineageTree:
    """Index, walk and cut cycles; see the module docstring. Later duplicates of a node id win."""
    by_id: dict[str, LineageNode] = {}
    for node in nodes:
        if node.root_id != root_id:
            raise InvalidInputError(f"node {node.node_id!r} belongs to root {node.root_id!r}, not {root_id!r}")
        by_id[node.node_id] = node

    children: dict[str, list[str]] = {}
    proper_tops: list[str] = []
    orphan_tops: list[str] = []
    for node_id, node in by_id.items():
        parent = node.parent_id
        if parent == root_id:
            proper_tops.append(node_id)
        elif parent in by_id:
            if parent in children:
                children[parent].append(node_id)
            else:
                children[parent] = [node_id]
        else:
            orphan_tops.append(node_id)

    tree = LineageTree(root_id=root_id, nodes=by_id)
    preorder, depths, lines = tree.preorder, tree.depths, tree.lines

    def visit(top: str, problem: TreeProblem | None) -> None:
        # Each node has one parent, so it is reached once, from that parent (a cycle's cut node is
        # first taken out of its parent's children).
        tree.tops[top] = problem
        path: list[str] = []  # from the top to the node being visited
        stack, stack_depths = [top], [0]  # two stacks: no tuple per node for the collector to track
        while stack:
            node_id, depth = stack.pop(), stack_depths.pop()
            del path[depth:]
            path.append(node_id)
            preorder.append(node_id)
            depths.append(depth)
            kids = children.get(node_id)
            if kids:
                stack.extend(reversed(kids))
                stack_depths.extend([depth + 1] * len(kids))
                continue
            status: Status
            if problem is not None:
                status = problem
            elif by_id[node_id].action_taken in terminal_actions:
                status = "complete"
            else:
                status = "unterminated"
            lines.append(TraceLine(node_id, status, tuple(path)))

    for top in proper_tops:
        visit(top, None)
    for top in orphan_tops:
        visit(top, "missing_parent")
    if len(preorder) < len(by_id):
        # Unreached nodes: following parents from one must end in a loop (every parent exists and
        # is unreached). Cut the loop at its earliest node and walk from there.
        visited = set(preorder)
        for node_id in by_id:
            if node_id in visited:
                continue
            position: dict[str, int] = {}
            loop_path: list[str] = []
            current = node_id
            while current not in position:
                position[current] = len(loop_path)
                loop_path.append(current)
                current = by_id[current].parent_id
            loop = loop_path[position[current] :]
            cut = min(loop, key=lambda member: (by_id[member].recorded_at, member))
            children[by_id[cut].parent_id].remove(cut)
            first = len(preorder)
            visit(cut, "cycle")
            visited.update(preorder[first:])
    return tree
