"""lineage.html in a real browser: Debian's chromium, headless, offline, opens the file and runs its script.

The page's nodes are created by its script from the embedded JSON, so finding them in the dumped DOM
proves the script ran (under the page's own Content-Security-Policy). A column selected through the
address must light up the same upstream edges that ``ColumnGraph`` finds in Python.
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

from lakeline.lineage.columns.graph import ColumnGraph, FieldRef, LineageTree
from lakeline.lineage.viewer.html import build_lineage_graph, dataset_id, job_id, write_lineage_html
from tests.unit.test_lineage_html import NAMESPACE, SCRIPT_BREAKER, STAGE_B_TOTALS, lineage_sample_events

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


def tree_links(tree: LineageTree) -> set[tuple[str, str]]:
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
