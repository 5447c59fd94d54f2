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
from collections.abc import Mapping
from dataclasses import dataclass
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


def run_chromium(
    chromium: str, profile: Path, url: str, *extra: str, window: tuple[int, int] = WINDOW
) -> subprocess.CompletedProcess[str]:
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
        f"--window-size={window[0]},{window[1]}",
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
    # The parent job, named by every run's parent facet, is the box around the others.
    groups = {attrs["data-group-id"] for _, attrs in dom.found if "data-group-id" in attrs}
    assert groups == graph.groups == {job_id("lakeline", "pipeline.sales")}
    assert set(drawn) == set(graph.node_ids) - groups
    assert len(graph.datasets) == 7 and len(graph.jobs) == 5
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
    assert body["data-rendered"] == str(len(graph.node_ids) - len(groups))


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
  out.textContent = JSON.stringify({ direction: document.getElementById("graph").getAttribute("data-direction"),
                                     boxes: boxes });
  document.body.appendChild(out);
})();
"""

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class Drawn:
    direction: str
    """Where the layers go: LR (left to right) or TB (top to bottom), whichever the page chose."""
    boxes: dict[str, Box]


def drawn_boxes(chromium: str, tmp_path: Path, page: str, click: list[str] | None = None) -> Drawn:
    script = f"var CLICK = {json.dumps(click or [])};\n" + BOXES
    driven = tmp_path / "boxes.html"
    driven.write_text(with_user_script(page, script), encoding="utf-8")
    result = run_chromium(chromium, tmp_path / "profile", driven.as_uri(), "--dump-dom")
    probe = Probe()
    probe.feed(result.stdout)
    assert probe.text, f"the probe did not run: {result.stderr[-2000:]}"
    found: dict[str, Any] = json.loads(probe.text)
    assert found["direction"] in ("LR", "TB")
    return Drawn(found["direction"], {node: (box[0], box[1], box[2], box[3]) for node, box in found["boxes"].items()})


def assert_no_overlaps(boxes: dict[str, Box]) -> None:
    placed = sorted(boxes.items(), key=lambda item: item[1])
    for index, (node, (left, top, right, bottom)) in enumerate(placed):
        assert right > left and bottom > top, node
        for other, (o_left, o_top, _, o_bottom) in placed[index + 1 :]:
            if o_left >= right:
                break  # sorted by left: nothing further can reach back over this box
            assert o_top >= bottom or o_bottom <= top, f"{node} overlaps {other}"


def assert_in_order(drawn: Drawn, edges: set[tuple[str, str]]) -> None:
    """Every edge goes with the layers: its source left of (LR) or above (TB) its target."""
    boxes = drawn.boxes
    for source, target in edges:
        if drawn.direction == "LR":
            assert boxes[source][2] < boxes[target][0], f"{source} is not left of {target}"
        else:
            assert boxes[source][3] < boxes[target][1], f"{source} is not above {target}"


def layers_of(drawn: Drawn) -> dict[str, int]:
    """The layer of each node: dagre centres the nodes of one layer on one line across the direction."""
    axis = (0, 2) if drawn.direction == "LR" else (1, 3)

    def centre(box: Box) -> float:
        return round((box[axis[0]] + box[axis[1]]) / 2, 1)

    centres = sorted({centre(box) for box in drawn.boxes.values()})
    return {node: centres.index(centre(box)) for node, box in drawn.boxes.items()}


def test_layout_goes_in_order_by_depth_without_overlaps(
    chromium: str, page: Path, events: list[dict[str, Any]], tmp_path: Path
) -> None:
    graph = build_lineage_graph(events)
    drawn = drawn_boxes(chromium, tmp_path, page.read_text(encoding="utf-8"))
    assert set(drawn.boxes) == set(graph.node_ids) - graph.groups
    assert_no_overlaps(drawn.boxes)
    assert_in_order(drawn, graph.edges)
    layer = layers_of(drawn)

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
    closed = drawn_boxes(chromium, tmp_path, page.read_text(encoding="utf-8")).boxes
    drawn = drawn_boxes(chromium, tmp_path, page.read_text(encoding="utf-8"), click=opened)
    boxes = drawn.boxes
    for node in opened:
        assert boxes[node][3] - boxes[node][1] > 2 * (closed[node][3] - closed[node][1]), node  # 4 and 6 column rows
    assert_no_overlaps(boxes)
    assert_in_order(drawn, graph.edges)


def test_cycles_are_drawn_without_overlaps(chromium: str, tmp_path: Path) -> None:
    page = write_lineage_html(cycle_events(), tmp_path / "cycles.html")
    boxes = drawn_boxes(chromium, tmp_path, page.read_text(encoding="utf-8")).boxes
    assert set(boxes) == set(build_lineage_graph(cycle_events()).node_ids)
    assert_no_overlaps(boxes)


def test_two_hundred_nodes_lay_out_in_order(chromium: str, tmp_path: Path) -> None:
    # 20 chains of 5 steps: 100 jobs and 120 datasets, plus a shared dimension read by every first step.
    graph = build_lineage_graph(chain_events())
    page = write_lineage_html(chain_events(), tmp_path / "chains.html")
    drawn = drawn_boxes(chromium, tmp_path, page.read_text(encoding="utf-8"))
    boxes = drawn.boxes
    assert len(boxes) == 221
    assert_no_overlaps(boxes)
    assert drawn.direction == "LR"  # 6 layers of 40 nodes: left to right shows more of it
    assert_in_order(drawn, graph.edges)
    # Each chain stays on one row: the layout keeps its nodes level with each other.
    for chain in range(20):
        rows = {round(boxes[dataset_id(NAMESPACE, f"c{chain}.t{step}")][1], 1) for step in range(1, 6)}
        assert len(rows) == 1, (chain, rows)


# ------------------------------------------------------------------------------------------- at a glance

SCREEN = (1400, 900)
ATHENA = "awsathena://athena.us-east-1.amazonaws.com"
PIPELINE_JOBS = "lakeline-dev"


def pipeline_events(
    stage_a: list[tuple[str, str]],
    stage_b: list[tuple[str, list[str]]],
    failed: Mapping[str, str] | None = None,
    blocked: Mapping[str, tuple[str, list[dict[str, Any]]]] | None = None,
) -> list[dict[str, Any]]:
    """RunEvents shaped as Lakeline's pipeline emits them: ``pipeline`` is the parent of ``stage_a`` and of one
    ``stage_b.<target>`` per target; ``stage_a`` of one job per (raw, stage) table, ``stage_b.<target>`` of its
    ``.step0``. ``failed`` maps a target to the error its stage B run (parent and step) failed with; ``blocked``
    to the error and the ``dataQualityAssertions`` of its checks' run (``.quality``, #41), which fails after the
    step completed."""
    failed, blocked = failed or {}, blocked or {}
    events: list[dict[str, Any]] = []

    def run(
        name: str,
        parent: str | None,
        inputs: list[str],
        outputs: list[str],
        error: str | None,
        assertions: list[dict[str, Any]] | None = None,
    ) -> None:
        facets: dict[str, Any] = {}
        if parent is not None:
            facets["parent"] = {
                "job": {"namespace": PIPELINE_JOBS, "name": parent},
                "run": {"runId": f"run-{parent}"},
            }
        for state in ("START", "FAIL" if error else "COMPLETE"):
            events.append(
                {
                    "eventType": state,
                    "eventTime": f"2026-01-20T06:{len(events) // 60:02}:{len(events) % 60:02}+00:00",
                    "run": {
                        "runId": f"run-{name}",
                        "facets": facets | ({"errorMessage": {"message": error}} if error and state == "FAIL" else {}),
                    },
                    "job": {"namespace": PIPELINE_JOBS, "name": name},
                    "inputs": [
                        {"namespace": ATHENA, "name": f"AwsDataCatalog.{table}"}
                        | (
                            {"inputFacets": {"dataQualityAssertions": {"assertions": assertions}}}
                            if assertions is not None and state != "START"
                            else {}
                        )
                        for table in inputs
                    ],
                    "outputs": [{"namespace": ATHENA, "name": f"AwsDataCatalog.{table}"} for table in outputs],
                }
            )

    run("pipeline", None, [], [], None)
    run("stage_a", "pipeline", [], [], None)
    for raw, stage in stage_a:
        run(f"stage_a.{stage}", "stage_a", [raw], [stage], None)
    for target, inputs in stage_b:
        refused, assertions = blocked.get(target, (None, None))
        error = failed.get(target) or refused
        run(f"stage_b.{target}", "pipeline", [], [], error)
        run(f"stage_b.{target}.step0", f"stage_b.{target}", inputs, [target], None if refused else error)
        if assertions is not None:
            run(f"stage_b.{target}.quality", f"stage_b.{target}", [target], [], refused, assertions)
    return events


def demo_events() -> list[dict[str, Any]]:
    """The graph of ``make demo``'s events: its 8 tables, its jobs and their parents."""
    orders, customers = "engineering_sales_dev.orders", "engineering_mysql_dev.customers"
    daily = "engineering_analytics_dev.daily_sales"
    return pipeline_events(
        [("engineering_sales_raw_dev.orders", orders), ("engineering_mysql_raw_dev.customers", customers)],
        [
            (daily, [orders, customers]),
            ("engineering_analytics_dev.customers_by_country", [customers]),
            ("engineering_analytics_dev.destination_table", [customers]),
            ("engineering_analytics_dev.weekly_sales", [daily]),
        ],
    )


FAILED_REPORT = "engineering_analytics_dev.report_03"
BLOCKED_REPORT = "engineering_analytics_dev.report_07"


def thirty_table_events() -> list[dict[str, Any]]:
    """A project of 30 tables: 10 raw tables of three sources, their 10 stage tables, 10 reports reading two
    stage tables each; one report's run failed in Athena, one was blocked by a data quality check."""
    teams = ("sales", "mysql", "crm")
    stage_a = [
        (
            f"engineering_{teams[n % 3]}_raw_dev.{teams[n % 3]}_table_{n:02}",
            f"engineering_{teams[n % 3]}_dev.{teams[n % 3]}_table_{n:02}",
        )
        for n in range(10)
    ]
    stage_b = [
        (f"engineering_analytics_dev.report_{n:02}", [stage_a[n][1], stage_a[(n + 1) % 10][1]]) for n in range(10)
    ]
    failed = {FAILED_REPORT: "Athena query failed: HIVE_BAD_DATA"}
    reason = "quality failed: QualityBlocked: quality checks blocked report_07: rule 'RowCount > 0' failed"
    assertions = [
        {"assertion": "RowCount", "success": False, "severity": "error", "actual": "0", "content": "RowCount > 0"},
        {"assertion": "IsComplete", "success": True, "severity": "warn", "column": "id", "content": 'IsComplete "id"'},
    ]
    return pipeline_events(stage_a, stage_b, failed, {BLOCKED_REPORT: (reason, assertions)})


# What the first view shows, measured in the page: each node's and group's box on the screen, its label (the
# text, its length against the box) and the label's font size on the screen.
GLANCE = """
(function () {
  "use strict";
  var svg = document.getElementById("graph");
  function rect(element) {
    var r = element.getBoundingClientRect();
    return [r.left, r.top, r.right, r.bottom];
  }
  function onScreen(text) {
    return parseFloat(getComputedStyle(text).fontSize) * text.getScreenCTM().a;
  }
  function measure(element, label, box) {
    return {
      classes: element.getAttribute("class"),
      text: label.textContent,
      room: box.width.baseVal.value - label.x.baseVal[0].value,
      length: label.getComputedTextLength(),
      font: onScreen(label),
      box: rect(box),
    };
  }
  var seen = { page: [innerWidth, innerHeight], area: rect(svg), nodes: {}, groups: {} };
  seen.direction = svg.getAttribute("data-direction");
  document.querySelectorAll("[data-node-id]").forEach(function (node) {
    var seenNode = measure(node, node.querySelector(".label"), node.querySelector(".box"));
    seenNode.title = node.querySelector("title").textContent;
    seenNode.sub = node.querySelector(".sub").textContent;
    seen.nodes[node.getAttribute("data-node-id")] = seenNode;
  });
  document.querySelectorAll("[data-group-id]").forEach(function (group) {
    var seenGroup = measure(group, group.querySelector(".group-label"), group.querySelector(".group-box"));
    seenGroup.shown = getComputedStyle(group).display !== "none";
    seen.groups[group.getAttribute("data-group-id")] = seenGroup;
  });
  // Clicking a group's name opens its job in the panel (after the measures: the panel takes room).
  var first = document.querySelector("[data-group-id]");
  first.querySelector(".group-label").dispatchEvent(new MouseEvent("click", { bubbles: true }));
  seen.clicked = [first.getAttribute("data-group-id"), document.querySelector("#details h2").textContent];
  var out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(seen);
  document.body.appendChild(out);
})();
"""


@pytest.fixture(scope="module")
def screen_window(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, int]:
    """The window size whose page is SCREEN: headless chromium takes room for its (absent) browser frame
    out of the window with --dump-dom, not with --screenshot, so the probe asks for that much more."""
    folder = tmp_path_factory.mktemp("viewport")
    page = folder / "size.html"
    script = 'document.body.setAttribute("data-size", innerWidth + "," + innerHeight);'
    page.write_text(f"<!DOCTYPE html><html><body><script>{script}</script></body></html>", encoding="utf-8")
    result = run_chromium(chromium, folder / "profile", page.as_uri(), "--dump-dom", window=SCREEN)
    width, height = (int(n) for n in result.stdout.split('data-size="')[1].split('"')[0].split(","))
    return 2 * SCREEN[0] - width, 2 * SCREEN[1] - height


def glance(chromium: str, tmp_path: Path, page: Path, window: tuple[int, int]) -> dict[str, Any]:
    driven = tmp_path / f"{page.stem}-glance.html"
    driven.write_text(with_user_script(page.read_text(encoding="utf-8"), GLANCE), encoding="utf-8")
    result = run_chromium(chromium, tmp_path / "profile", driven.as_uri(), "--dump-dom", window=window)
    probe = Probe()
    probe.feed(result.stdout)
    assert probe.text, f"the probe did not run: {result.stderr[-2000:]}"
    seen: dict[str, Any] = json.loads(probe.text)
    return seen


def inside(inner: list[float], outer: list[float]) -> bool:
    return inner[0] >= outer[0] and inner[1] >= outer[1] and inner[2] <= outer[2] and inner[3] <= outer[3]


@pytest.mark.parametrize("project", ["demo", "thirty_tables"])
def test_the_first_view_reads_at_a_glance(
    chromium: str, screen_window: tuple[int, int], tmp_path: Path, project: str
) -> None:
    events = demo_events() if project == "demo" else thirty_table_events()
    graph = build_lineage_graph(events)
    page = write_lineage_html(events, tmp_path / f"{project}.html", title=project)
    seen = glance(chromium, tmp_path, page, screen_window)
    assert seen["page"] == list(SCREEN)
    nodes, groups = seen["nodes"], seen["groups"]
    assert set(nodes) == set(graph.node_ids) - graph.groups and set(groups) == graph.groups
    assert len(graph.datasets) == (8 if project == "demo" else 30)
    for node_id, node in nodes.items():
        # The label names the table whole (database.table), the catalog kept in the tooltip and the panel.
        assert node["text"] == graph.display_label(node_id) and "\u2026" not in node["text"], node
        assert node["length"] <= node["room"] - 4, node
        if node_id in graph.datasets:
            name = graph.datasets[node_id].name
            assert name.startswith("AwsDataCatalog.") and node["text"] == name.removeprefix("AwsDataCatalog.")
            assert node["text"].count(".") == 1 and name in node["title"]
        # Every node is on the screen, large enough to read without zooming.
        assert inside(node["box"], seen["area"]), (node_id, node["box"], seen["area"])
        assert node["font"] >= 10, node
    assert_no_overlaps({node_id: (*node["box"],) for node_id, node in nodes.items()})
    # The parent jobs are boxes around the jobs of their runs (and what those alone write), names whole.
    assert {graph.jobs[group].name for group in groups} == {
        "pipeline",
        "stage_a",
        *(
            f"stage_b.{table.name.removeprefix('AwsDataCatalog.')}"
            for table in graph.datasets.values()
            if "analytics" in table.name
        ),
    }
    for group_id, group in groups.items():
        assert group["shown"] and inside(group["box"], seen["area"]), group
        assert group["length"] <= group["room"] and group["font"] >= 10, group
        members = [node for node in [*nodes, *groups] if graph.group_of(node) == group_id]
        assert members, group_id
        for member in members:
            assert inside((nodes.get(member) or groups[member])["box"], group["box"]), (member, group_id)
    clicked, heading = seen["clicked"]
    assert heading == graph.jobs[clicked].name
    stage_a = job_id(PIPELINE_JOBS, "stage_a")
    assert all(graph.group_of(job) == stage_a for job in graph.jobs if graph.jobs[job].name.startswith("stage_a."))
    # A failed run is marked, on its job and on its parent's box; one blocked by a quality check apart.
    marked = {graph.jobs[n].name for n, node in nodes.items() if "failed" in node["classes"].split()}
    blocked = {graph.jobs[n].name for n, node in nodes.items() if "blocked" in node["classes"].split()}
    if project == "demo":
        assert not marked and seen["direction"] == "TB"  # 9 layers of few nodes: top to bottom fills the screen
    else:
        # The blocked run's step completed (its version was refused after it): its box says BLOCKED, and the
        # dataset its checks refused is marked, its caption counting the failed rules (#41); the checks' job is
        # not a node of its own.
        assert marked == {f"stage_b.{FAILED_REPORT}.step0"} and blocked == set()
        assert not any(graph.jobs[job].name.endswith(".quality") for job in graph.jobs)
        checked = {n for n, node in nodes.items() if "checks-failed" in node["classes"].split()}
        assert checked == {dataset_id(ATHENA, f"AwsDataCatalog.{BLOCKED_REPORT}")}
        assert "\u26a0 1 of 2 checks failed" in nodes[checked.pop()]["sub"]
        failed_groups = {graph.jobs[n].name for n, group in groups.items() if "failed" in group["classes"].split()}
        assert failed_groups == {f"stage_b.{FAILED_REPORT}", f"stage_b.{BLOCKED_REPORT}"}
        assert "\u26a0 BLOCKED" in groups[job_id(PIPELINE_JOBS, f"stage_b.{BLOCKED_REPORT}")]["text"]
    # The screenshot a person would see, kept with the test's files.
    shot = tmp_path / "shots" / f"{project}.png"
    shot.parent.mkdir()
    run_chromium(
        chromium, tmp_path / "profile", page.as_uri(), f"--screenshot={shot}", "--hide-scrollbars", window=SCREEN
    )
    assert png_size(shot) == SCREEN
    assert shot.stat().st_size > 40_000, shot.stat().st_size


# Clicks the dataset its checks refused and reads its details panel.
CHECKS_PANEL = """
(function () {
  "use strict";
  var node = document.querySelector('[data-node-id="NODE"]');
  node.dispatchEvent(new MouseEvent("click", { bubbles: true }));
  var seen = {
    heading: document.querySelector("#details h3:nth-of-type(2)").textContent,
    checks: Array.from(document.querySelectorAll("#details li.check")).map(function (li) {
      return [li.getAttribute("class"), li.textContent];
    }),
  };
  var out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(seen);
  document.body.appendChild(out);
})();
"""


def test_the_panel_of_a_dataset_its_checks_refused_lists_the_rules_failed_first(chromium: str, tmp_path: Path) -> None:
    """#41: clicking the marked dataset lists its latest checks, the failed rule first with its severity and
    metric."""
    page = write_lineage_html(thirty_table_events(), tmp_path / "checks.html", title="checks")
    node = dataset_id(ATHENA, f"AwsDataCatalog.{BLOCKED_REPORT}")
    driven = tmp_path / "checks-driven.html"
    driven.write_text(
        with_user_script(page.read_text(encoding="utf-8"), CHECKS_PANEL.replace("NODE", node)), encoding="utf-8"
    )
    result = run_chromium(chromium, tmp_path / "profile", driven.as_uri(), "--dump-dom", window=SCREEN)
    probe = Probe()
    probe.feed(result.stdout)
    assert probe.text, f"the probe did not run: {result.stderr[-2000:]}"
    seen = json.loads(probe.text)
    assert seen["heading"] == "Quality checks: 1 of 2 failed"
    assert seen["checks"] == [
        ["check failed", "\u2717 RowCount > 0 (error, metric 0)"],
        ["check passed", '\u2713 IsComplete "id" (warn)'],
    ]
