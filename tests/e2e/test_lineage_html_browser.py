"""lineage.html in a real browser: Debian's chromium, headless, offline, opens the file and runs its script.

The page's nodes are created by its script from the embedded JSON, so finding them in the dumped DOM
proves the script ran (under the page's own Content-Security-Policy). A column selected through the
address must light up the same upstream edges that ``ColumnGraph`` finds in Python. The layout is done
in the page (dagre): where the drawn nodes are is checked here, left to right and never overlapping.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from lakeline.lineage.viewer.column_graph import ColumnGraph, FieldLineageTree, FieldRef
from lakeline.lineage.viewer.html import build_lineage_graph, dataset_id, job_id, write_lineage_html
from tests.unit.test_lineage_html import (
    NAMESPACE,
    SCRIPT_BREAKER,
    STAGE_B_TOTALS,
    chain_events,
    cycle_events,
    lineage_sample_events,
)

WINDOW = (1600, 1000)
TIMEOUT = 60


@pytest.fixture(scope="module")
def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("chromium is not on PATH: run scripts/ensure-chromium.sh (installs Debian's chromium)")
    return path


@pytest.fixture(scope="module")
def events() -> list[dict[str, Any]]:
    return lineage_sample_events()


@pytest.fixture(scope="module")
def page(events: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_lineage_html(events, tmp_path_factory.mktemp("workspace") / "lineage.html", title="Demo lineage")


def run_chromium(chromium: str, profile: Path, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        *extra,
        url,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert result.returncode == 0, f"chromium failed ({result.returncode}): {result.stderr[-2000:]}"
    return result


class Elements(HTMLParser):
    """Every element of a dumped DOM, as (tag, attributes)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {name: value or "" for name, value in attrs}))

    def with_class(self, name: str) -> list[dict[str, str]]:
        return [attrs for _, attrs in self.found if name in attrs.get("class", "").split()]


def dump_dom(chromium: str, tmp_path: Path, url: str) -> Elements:
    result = run_chromium(chromium, tmp_path / "profile", url, "--dump-dom")
    assert "<svg" in result.stdout, result.stderr[-2000:]
    elements = Elements()
    elements.feed(result.stdout)
    return elements


def test_every_dataset_and_job_is_drawn(
    chromium: str, page: Path, events: list[dict[str, Any]], tmp_path: Path
) -> None:
    graph = build_lineage_graph(events)
    dom = dump_dom(chromium, tmp_path, page.as_uri())
    drawn = {attrs["data-node-id"]: attrs for _, attrs in dom.found if "data-node-id" in attrs}
    assert set(drawn) == set(graph.node_ids)
    assert len(graph.datasets) == 7 and len(graph.jobs) == 4
    for node_id in graph.datasets:
        assert drawn[node_id]["class"].split()[:2] == ["node", "dataset"]
    failed = {node_id for node_id, attrs in drawn.items() if "failed" in attrs["class"].split()}
    assert failed == {node_id for node_id, job in graph.jobs.items() if job.failed}
    assert failed == {job_id("lakeline", "stage_b.flags")}
    edges = dom.with_class("edge")
    assert {(e["data-source"], e["data-target"]) for e in edges} == graph.edges
    assert all(e["d"].startswith("M") for e in edges)
    # The SQL holding '</script>' did not break the page: the script got to its last line.
    body = next(attrs for tag, attrs in dom.found if tag == "body")
    assert body["data-rendered"] == str(len(graph.node_ids))


def tree_links(tree: FieldLineageTree) -> set[tuple[str, str]]:
    """(source column, target column or whole dataset) of every link in a ``ColumnGraph`` tree."""
    links = set()
    for child in tree.children:
        target = tree.ref.dataset.removeprefix("AwsDataCatalog.") if child.dataset_level else str(tree.ref)
        links.add((str(child.ref), target))
        links |= tree_links(child)
    return links


@pytest.mark.parametrize(
    ("dataset", "column"),
    [("AwsDataCatalog.mart.daily_sales", "revenue"), ("AwsDataCatalog.mart.customer_flags", "flag")],
)
def test_a_selected_column_lights_up_what_it_comes_from(
    chromium: str, page: Path, events: list[dict[str, Any]], tmp_path: Path, dataset: str, column: str
) -> None:
    url = page.as_uri() + "#" + urlencode({"dataset": dataset, "column": column})
    dom = dump_dom(chromium, tmp_path, url)
    # Trees print catalog tables without the spec's ``AwsDataCatalog.`` prefix; the page's nodes carry it.
    names = {
        node.id: node.name.removeprefix("AwsDataCatalog.") for node in build_lineage_graph(events).datasets.values()
    }
    drawn = {
        (
            f"{names[e['data-source']]}.{e['data-source-field']}",
            names[e["data-target"]] + (f".{e['data-target-field']}" if e["data-target-field"] else ""),
        )
        for e in dom.with_class("column-edge")
    }
    expected = tree_links(ColumnGraph.from_events(events).tree(FieldRef(NAMESPACE, dataset, column)))
    assert drawn == expected
    assert drawn, "the selected column has upstream edges"
    if column == "revenue":
        assert ("raw.orders.amount", "sales.orders.amount") in drawn
        assert ("sales.orders.status", "mart.tmp_totals") in drawn  # the filter shapes the whole table
    styles = {e["class"] for e in dom.with_class("column-edge")}
    assert styles <= {"column-edge direct", "column-edge indirect"}
    chosen = dom.with_class("chosen")
    assert [attrs["data-column"] for attrs in chosen] == [column]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_screenshot_shows_the_graph(chromium: str, page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shots" / "lineage.png"
    shot.parent.mkdir()
    url = page.as_uri() + "#" + urlencode({"dataset": "AwsDataCatalog.mart.daily_sales", "column": "revenue"})
    run_chromium(chromium, tmp_path / "profile", url, f"--screenshot={shot}", "--hide-scrollbars")
    assert png_size(shot) == WINDOW
    # A blank page of this size compresses to a few kB; nodes, labels and edges make it far larger.
    assert shot.stat().st_size > 40_000, shot.stat().st_size


# What a person does on the page, played by a script added after the page's own: hover a job, search,
# open a dataset, pick one of its columns. It leaves what it saw in <pre id="probe"> for the DOM dump.
USER = """
(function () {
  "use strict";
  var probe = {};
  function node(id) { return document.querySelector('[data-node-id="' + CSS.escape(id) + '"]'); }
  var tip = document.getElementById("tooltip");
  var job = node(JOB);
  job.dispatchEvent(new MouseEvent("mouseenter", { clientX: 300, clientY: 300 }));
  probe.tipShown = !tip.hidden;
  probe.tip = tip.textContent;
  probe.tipPre = tip.querySelector("pre") ? tip.querySelector("pre").textContent : null;
  job.dispatchEvent(new MouseEvent("mouseleave"));
  probe.tipHiddenAfter = tip.hidden;
  var search = document.getElementById("search");
  search.value = "DAILY";
  search.dispatchEvent(new Event("input"));
  probe.matching = Array.from(document.querySelectorAll(".node:not(.filtered-out)"))
    .map(function (e) { return e.getAttribute("data-node-id"); });
  probe.summary = document.getElementById("summary").textContent;
  search.value = "";
  search.dispatchEvent(new Event("input"));
  var dataset = node(DATASET);
  dataset.dispatchEvent(new MouseEvent("click", { bubbles: true }));
  probe.rows = Array.from(dataset.querySelectorAll(".column-row"))
    .map(function (e) { return e.getAttribute("data-column"); });
  probe.boxHeight = Number(dataset.querySelector(".box").getAttribute("height"));
  probe.panel = document.getElementById("details").textContent;
  dataset.querySelector('[data-column="amount"]').dispatchEvent(new MouseEvent("click", { bubbles: true }));
  probe.columnEdges = document.querySelectorAll(".column-edge").length;
  probe.address = decodeURIComponent(location.hash);
  probe.title = document.title;
  var out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(probe);
  document.body.appendChild(out);
})();
"""


def with_user_script(page: str, script: str) -> str:
    """The page with ``script`` run after its own, and allowed by its Content-Security-Policy."""
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert page.count("script-src '") == 1 and page.count("</body>") == 1
    page = page.replace("script-src '", f"script-src 'sha256-{digest}' '")
    return page.replace("</body>", f"<script>{script}</script>\n</body>")


class Probe(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.inside = tag == "pre" and ("id", "probe") in attrs

    def handle_data(self, data: str) -> None:
        if self.inside:
            self.text += data

    def handle_endtag(self, tag: str) -> None:
        self.inside = False


def test_hover_search_and_clicks_work(chromium: str, page: Path, tmp_path: Path) -> None:
    constants = {
        "JOB": job_id("lakeline", "stage_b.totals"),
        "DATASET": dataset_id(NAMESPACE, "AwsDataCatalog.sales.orders"),
    }
    script = "".join(f"var {name} = {json.dumps(value)};\n" for name, value in constants.items())
    driven = tmp_path / "driven.html"
    driven.write_text(with_user_script(page.read_text(encoding="utf-8"), script + USER), encoding="utf-8")
    result = run_chromium(chromium, tmp_path / "profile", driven.as_uri(), "--dump-dom")
    probe = Probe()
    probe.feed(result.stdout)
    assert probe.text, f"the user script did not run: {result.stderr[-2000:]}"
    seen = json.loads(probe.text)
    # Hovering a job shows its run state and its SQL, '</script>' included, as text.
    assert seen["tipShown"] and seen["tipHiddenAfter"]
    assert "stage_b.totals" in seen["tip"] and "COMPLETE" in seen["tip"] and "1 run" in seen["tip"]
    assert seen["tipPre"] == STAGE_B_TOTALS and SCRIPT_BREAKER in seen["tipPre"]
    assert seen["title"] == "Demo lineage"
    # The search box filters by name, whatever the case.
    assert sorted(seen["matching"]) == sorted(
        [job_id("lakeline", "stage_b.daily"), dataset_id(NAMESPACE, "AwsDataCatalog.mart.daily_sales")]
    )
    assert seen["summary"] == "2 of 11 nodes match"
    # Clicking a dataset shows its columns, in the node and in the panel.
    assert seen["rows"] == ["order_id", "customer_id", "amount", "status", "date", "dt"]
    assert seen["boxHeight"] > 40 + 6 * 17
    assert "sales.orders" in seen["panel"] and "customer_id" in seen["panel"] and "Written by" in seen["panel"]
    # Clicking a column highlights where it comes from and puts it in the address.
    assert seen["columnEdges"] == 1  # raw.orders.amount -> sales.orders.amount, DIRECT
    assert seen["address"] == "#dataset=AwsDataCatalog.sales.orders&column=amount"


# ------------------------------------------------------------------------------------------- the layout

# Where every node's box is drawn, in the page's pixels, after the page laid it out (and after a click on
# each of CLICK, to open those datasets: an open dataset is tall, and the layout must make room for it).
BOXES = """
(function () {
  "use strict";
  CLICK.forEach(function (id) {
    document.querySelector('[data-node-id="' + CSS.escape(id) + '"]').dispatchEvent(new MouseEvent("click"));
  });
  var boxes = {};
  document.querySelectorAll("[data-node-id]").forEach(function (node) {
    var r = node.querySelector(".box").getBoundingClientRect();
    boxes[node.getAttribute("data-node-id")] = [r.left, r.top, r.right, r.bottom];
  });
  var out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(boxes);
  document.body.appendChild(out);
})();
"""

Box = tuple[float, float, float, float]


def drawn_boxes(chromium: str, tmp_path: Path, page: str, click: list[str] | None = None) -> dict[str, Box]:
    script = f"var CLICK = {json.dumps(click or [])};\n" + BOXES
    driven = tmp_path / "boxes.html"
    driven.write_text(with_user_script(page, script), encoding="utf-8")
    result = run_chromium(chromium, tmp_path / "profile", driven.as_uri(), "--dump-dom")
    probe = Probe()
    probe.feed(result.stdout)
    assert probe.text, f"the probe did not run: {result.stderr[-2000:]}"
    found: dict[str, list[float]] = json.loads(probe.text)
    return {node: (box[0], box[1], box[2], box[3]) for node, box in found.items()}


def assert_no_overlaps(boxes: dict[str, Box]) -> None:
    placed = sorted(boxes.items(), key=lambda item: item[1])
    for index, (node, (left, top, right, bottom)) in enumerate(placed):
        assert right > left and bottom > top, node
        for other, (o_left, o_top, _, o_bottom) in placed[index + 1 :]:
            if o_left >= right:
                break  # sorted by left: nothing further can reach back over this box
            assert o_top >= bottom or o_bottom <= top, f"{node} overlaps {other}"


def assert_left_to_right(boxes: dict[str, Box], edges: set[tuple[str, str]]) -> None:
    for source, target in edges:
        assert boxes[source][2] < boxes[target][0], f"{source} is not left of {target}"


def layers_of(boxes: dict[str, Box]) -> dict[str, int]:
    """The layer of each node: dagre centres the nodes of one layer on one vertical line."""
    centres = sorted({round((left + right) / 2, 1) for left, _, right, _ in boxes.values()})
    return {node: centres.index(round((box[0] + box[2]) / 2, 1)) for node, box in boxes.items()}


def test_layout_goes_left_to_right_by_depth_without_overlaps(
    chromium: str, page: Path, events: list[dict[str, Any]], tmp_path: Path
) -> None:
    graph = build_lineage_graph(events)
    boxes = drawn_boxes(chromium, tmp_path, page.read_text(encoding="utf-8"))
    assert set(boxes) == set(graph.node_ids)
    assert_no_overlaps(boxes)
    assert_left_to_right(boxes, graph.edges)
    layer = layers_of(boxes)

    def ds(name: str) -> str:
        return dataset_id(NAMESPACE, f"AwsDataCatalog.{name}")

    assert layer[ds("raw.orders")] == 0
    assert layer[ds("mart.daily_sales")] == 6
    assert layer[ds("mart.tmp_totals")] == layer[ds("mart.customer_totals")]
    # A table only read sits just before its reader, not in the first layer.
    assert layer[ds("sales.customers")] == layer[job_id("lakeline", "stage_b.totals")] - 1


def test_open_datasets_get_room(chromium: str, page: Path, events: list[dict[str, Any]], tmp_path: Path) -> None:
    graph = build_lineage_graph(events)
    opened = [dataset_id(NAMESPACE, f"AwsDataCatalog.{name}") for name in ("sales.orders", "sales.customers")]
    closed = drawn_boxes(chromium, tmp_path, page.read_text(encoding="utf-8"))
    boxes = drawn_boxes(chromium, tmp_path, page.read_text(encoding="utf-8"), click=opened)
    for node in opened:
        assert boxes[node][3] - boxes[node][1] > 2 * (closed[node][3] - closed[node][1]), node  # 4 and 6 column rows
    assert_no_overlaps(boxes)
    assert_left_to_right(boxes, graph.edges)


def test_cycles_are_drawn_without_overlaps(chromium: str, tmp_path: Path) -> None:
    page = write_lineage_html(cycle_events(), tmp_path / "cycles.html")
    boxes = drawn_boxes(chromium, tmp_path, page.read_text(encoding="utf-8"))
    assert set(boxes) == set(build_lineage_graph(cycle_events()).node_ids)
    assert_no_overlaps(boxes)


def test_two_hundred_nodes_lay_out_in_order(chromium: str, tmp_path: Path) -> None:
    # 20 chains of 5 steps: 100 jobs and 120 datasets, plus a shared dimension read by every first step.
    graph = build_lineage_graph(chain_events())
    page = write_lineage_html(chain_events(), tmp_path / "chains.html")
    boxes = drawn_boxes(chromium, tmp_path, page.read_text(encoding="utf-8"))
    assert len(boxes) == 221
    assert_no_overlaps(boxes)
    assert_left_to_right(boxes, graph.edges)
    # Each chain stays on one row: the layout keeps its nodes level with each other.
    for chain in range(20):
        rows = {round(boxes[dataset_id(NAMESPACE, f"c{chain}.t{step}")][1], 1) for step in range(1, 6)}
        assert len(rows) == 1, (chain, rows)
