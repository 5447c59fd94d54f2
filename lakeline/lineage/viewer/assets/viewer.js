// The lineage page: draws the graph document that Python embedded as JSON (#lineage-data), laid out by
// dagre (inlined before this script as the global `dagre`). Every size and gap of the drawing is here.
(() => {
  "use strict";
  const SVG_NS = "http://www.w3.org/2000/svg";
  // Geometry of the nodes, in SVG pixels.
  const HEADER = 40; // a collapsed node, and the header of an open dataset above its column rows
  const ROW = 18; // one column row of an open dataset
  const ROW_PAD = 6; // below the last row
  const NODE_GAP = 18; // between nodes of one layer
  const LAYER_GAP = 40; // between layers
  // Between edges that pass through one layer, and, laid out compound, between a group's border and what is
  // next to it (dagre spaces a border like an edge): room for a group's padding and name.
  const EDGE_GAP = 28;
  const FLAT_GAP = 34; // between nodes of one layer when there are groups, laid out flat (see placed)
  const MARGIN = 30;
  const MIN_NODE_WIDTH = 110;
  const MAX_ROWS_WIDTH = 300; // an open dataset's column rows are cut beyond this; its name never is
  const LABEL_PADDING = 24; // left and right of the widest text of a node
  const GROUP_PAD = 8; // between a group's box and what it holds
  const GROUP_HEADER = 8; // the lower half of a group's name, which sits on its top border (a legend)
  const READABLE = 0.85; // the smallest zoom of the first view: labels of 12px stay >= 10px on screen
  const MAX_ZOOM = 1.4;
  const TEXT_X = 12; // where the texts of a node start
  const TYPE_CHARS = 14; // column types longer than this are cut in the rows (the panel shows them whole)
  const TYPE_GAP = 10; // between a column's name and its type

  const data = JSON.parse(document.getElementById("lineage-data").textContent);
  const svg = document.getElementById("graph");
  const viewport = document.getElementById("viewport");
  const groupLayer = document.getElementById("groups");
  const edgeLayer = document.getElementById("edges");
  const columnLayer = document.getElementById("column-edges");
  const nodeLayer = document.getElementById("nodes");
  const details = document.getElementById("details");
  const tooltip = document.getElementById("tooltip");
  const search = document.getElementById("search");
  const indirectBox = document.getElementById("indirect");
  const summary = document.getElementById("summary");

  const nodes = new Map(); // datasets and jobs: the boxes dagre places
  const groups = new Map(); // parent jobs: boxes around their runs' jobs (and what those alone write)
  const edges = [];
  const byField = new Map();
  const byDataset = new Map();
  let selection = null;
  const view = { x: 0, y: 0, k: 1 };
  let arrangement = null; // chosen once: the direction and whether dagre nests groups (see layout)
  let direction = "LR"; // of the arrangement in use: "LR" or "TB"

  function svgElement(name, attributes, parent) {
    const element = document.createElementNS(SVG_NS, name);
    for (const [key, value] of Object.entries(attributes || {})) {
      element.setAttribute(key, value);
    }
    if (parent) {
      parent.appendChild(element);
    }
    return element;
  }
  function htmlElement(name, text, className, parent) {
    const element = document.createElement(name);
    if (text !== undefined && text !== null) {
      element.textContent = text;
    }
    if (className) {
      element.className = className;
    }
    if (parent) {
      parent.appendChild(element);
    }
    return element;
  }
  function fieldKey(nodeId, field) {
    return `${nodeId}\u0000${field}`;
  }
  function columnName(dataset, field) {
    return field === null ? `${dataset} (every column)` : `${dataset}.${field}`;
  }
  function plural(count, word) {
    return `${count} ${word}${count === 1 ? "" : "s"}`;
  }

  // ---- text widths: measured in the fonts the style sheet gives each kind of text
  const measuring = document.createElement("canvas").getContext("2d");
  const fonts = new Map();
  function fontOf(kind) {
    if (!fonts.has(kind)) {
      // A hidden node holding one text of each kind: the style sheet decides their fonts.
      const probe = svgElement("g", { class: "node dataset", visibility: "hidden" }, nodeLayer);
      const element =
        kind === "label" || kind === "sub"
          ? svgElement("text", { class: kind }, probe)
          : svgElement(
              "text",
              { class: kind === "type" ? "type" : "" },
              svgElement("g", { class: "column-row" }, probe),
            );
      const style = getComputedStyle(element);
      fonts.set(kind, `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`);
      nodeLayer.removeChild(probe);
    }
    return fonts.get(kind);
  }
  function textWidth(text, kind) {
    measuring.font = fontOf(kind);
    return measuring.measureText(text).width;
  }
  function cut(text, width, kind) {
    if (textWidth(text, kind) <= width) {
      return text;
    }
    let low = 0;
    let high = text.length;
    while (low < high) {
      const middle = Math.ceil((low + high) / 2);
      if (textWidth(`${text.slice(0, middle)}\u2026`, kind) <= width) {
        low = middle;
      } else {
        high = middle - 1;
      }
    }
    return `${text.slice(0, Math.max(1, low))}\u2026`;
  }
  function typeText(type) {
    return type.length > TYPE_CHARS ? `${type.slice(0, TYPE_CHARS - 1)}\u2026` : type;
  }
  function typeWidth(column) {
    return column.type ? textWidth(typeText(column.type), "type") + TYPE_GAP : 0;
  }

  function jobCaption(item) {
    const state = item.blocked ? "BLOCKED" : item.state || "no state";
    return (
      `${item.failed ? "\u26a0 " : ""}${state} \u00b7 ${plural(item.runs, "run")}` +
      (item.failedRuns && !item.failed ? ` (${item.failedRuns} failed)` : "")
    );
  }
  // A dataset whose latest checks failed a rule says so after its columns (the panel lists the rules).
  function checksCaption(item) {
    const failed = item.failedChecks ? item.failedChecks.length : 0;
    return failed ? ` \u00b7 \u26a0 ${failed} of ${plural(item.checks.length, "check")} failed` : "";
  }
  function datasetCaption(item, expanded) {
    return (
      plural(item.columns.length, "column") +
      checksCaption(item) +
      (item.columns.length ? (expanded ? "  \u25be" : "  \u25b8") : "")
    );
  }
  // Wide enough for the whole label and the caption under it; an open dataset also for its column rows
  // (up to MAX_ROWS_WIDTH: a longer row is cut, the panel shows it whole).
  function nodeWidth(node, expanded) {
    const item = node.item;
    const caption = item.kind === "job" ? jobCaption(item) : datasetCaption(item, true);
    let wanted = Math.max(textWidth(item.label, "label"), textWidth(caption, "sub")) + LABEL_PADDING;
    if (expanded) {
      let rows = 0;
      for (const column of item.columns) {
        rows = Math.max(rows, textWidth(column.name, "row") + typeWidth(column));
      }
      wanted = Math.max(wanted, Math.min(MAX_ROWS_WIDTH, rows + LABEL_PADDING));
    }
    return Math.ceil(Math.max(MIN_NODE_WIDTH, node.minWidth || 0, wanted));
  }
  // After a group's name: only a failure (the panel and the tooltip say the rest).
  function groupCaption(item) {
    return item.failed ? ` \u00b7 \u26a0 ${item.blocked ? "BLOCKED" : item.state}` : "";
  }
  // A group is as wide as what it holds: its widest job or dataset is widened to give its name room.
  function roomForGroupNames() {
    for (const group of groups.values()) {
      const wanted = textWidth(group.item.label + groupCaption(group.item), "label") + 2 * GROUP_PAD + 4;
      const members = Array.from(nodes.values()).filter((node) => node.item.parent === group.item.id);
      const widest = members.reduce((best, node) => (best && best.width >= node.width ? best : node), null);
      if (widest && widest.width < wanted - 2 * GROUP_PAD) {
        widest.minWidth = Math.ceil(wanted - 2 * GROUP_PAD);
        widest.width = nodeWidth(widest, widest.expanded);
        widest.element.querySelector(".box").setAttribute("width", widest.width);
      }
    }
  }

  // ---- nodes and edges, built from the embedded JSON
  for (const item of data.nodes) {
    const entry = { item, x: 0, y: 0, width: 0, height: HEADER, expanded: false, rows: null, element: null };
    (item.group ? groups : nodes).set(item.id, entry);
  }
  for (const edge of data.columnEdges) {
    const index = edge.targetField === null ? byDataset : byField;
    const key = edge.targetField === null ? edge.target : fieldKey(edge.target, edge.targetField);
    if (!index.has(key)) {
      index.set(key, []);
    }
    index.get(key).push(edge);
  }

  function drawNode(node) {
    const item = node.item;
    const checked = checksCaption(item) ? " checks-failed" : "";
    const classes = `node ${item.kind}${item.failed ? " failed" : ""}${item.blocked ? " blocked" : ""}${checked}`;
    const group = svgElement(
      "g",
      { class: classes, "data-node-id": item.id, tabindex: "0", role: "button" },
      nodeLayer,
    );
    node.element = group;
    node.width = nodeWidth(node, false);
    svgElement("rect", { class: "box", width: node.width, height: HEADER, rx: item.kind === "job" ? 18 : 5 }, group);
    const label = svgElement("text", { class: "label", x: TEXT_X, y: 17 }, group);
    label.textContent = item.label;
    node.sub = svgElement("text", { class: "sub", x: TEXT_X, y: 32 }, group);
    svgElement("title", {}, group).textContent = `${item.namespace} / ${item.name}`;
    if (item.kind === "dataset") {
      node.sub.textContent = datasetCaption(item, false);
      group.addEventListener("click", (event) => {
        event.stopPropagation();
        toggleDataset(node);
      });
    } else {
      node.sub.textContent = jobCaption(item);
      jobEvents(group, item);
    }
    group.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        group.dispatchEvent(new MouseEvent("click"));
      }
    });
  }

  function jobEvents(element, item) {
    element.addEventListener("mouseenter", (event) => showJobTip(item, event));
    element.addEventListener("mousemove", (event) => placeTip(event));
    element.addEventListener("mouseleave", () => {
      tooltip.hidden = true;
    });
    element.addEventListener("click", (event) => {
      event.stopPropagation();
      showJob(item);
    });
  }
  // A parent job: a box behind the jobs of its runs, its name (and a failure) in a band at its top.
  function drawGroup(entry) {
    const item = entry.item;
    const classes = `group${item.failed ? " failed" : ""}${item.blocked ? " blocked" : ""}`;
    const element = svgElement("g", { class: classes, "data-group-id": item.id }, groupLayer);
    entry.element = element;
    entry.box = svgElement("rect", { class: "group-box", rx: 8 }, element);
    entry.legend = svgElement("rect", { class: "group-legend", x: GROUP_PAD - 4, y: -8, height: 16, rx: 3 }, element);
    const label = svgElement(
      "text",
      { class: "group-label", x: GROUP_PAD, y: 4, tabindex: "0", role: "button" },
      element,
    );
    label.textContent = item.label;
    svgElement("tspan", { class: "group-sub" }, label).textContent = groupCaption(item);
    entry.legend.setAttribute("width", textWidth(item.label + groupCaption(item), "label") + 8);
    svgElement("title", {}, element).textContent = `${item.namespace} / ${item.name}`;
    jobEvents(label, item);
    label.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        showJob(item);
      }
    });
  }

  function drawRows(node) {
    const item = node.item;
    const width = nodeWidth(node, true);
    node.rows = new Map();
    const box = svgElement("g", { class: "columns" }, node.element);
    svgElement("line", { class: "divider", x1: 0, y1: HEADER, x2: width, y2: HEADER }, box);
    item.columns.forEach((column, index) => {
      const row = svgElement(
        "g",
        { class: "column-row", "data-column": column.name, transform: `translate(0,${HEADER + index * ROW})` },
        box,
      );
      svgElement("rect", { x: 1, y: 0, width: width - 2, height: ROW }, row);
      const room = width - 2 * TEXT_X - typeWidth(column);
      svgElement("text", { x: TEXT_X, y: 13 }, row).textContent = cut(column.name, room, "row");
      if (column.type) {
        const type = svgElement("text", { class: "type", x: width - 8, y: 13, "text-anchor": "end" }, row);
        type.textContent = typeText(column.type);
      }
      row.addEventListener("click", (event) => {
        event.stopPropagation();
        selectColumn(item.id, column.name, true);
      });
      node.rows.set(column.name, row);
    });
    box.style.display = "none";
    node.columnsBox = box;
  }

  function setExpanded(node, expanded) {
    if (node.item.kind !== "dataset" || !node.item.columns.length || node.expanded === expanded) {
      return;
    }
    if (!node.rows) {
      drawRows(node);
    }
    node.expanded = expanded;
    node.columnsBox.style.display = expanded ? "" : "none";
    node.height = expanded ? HEADER + node.item.columns.length * ROW + ROW_PAD : HEADER;
    node.element.querySelector(".box").setAttribute("height", node.height);
    node.width = nodeWidth(node, expanded);
    node.element.querySelector(".box").setAttribute("width", node.width);
    node.sub.textContent = datasetCaption(node.item, expanded);
  }

  // ---- placement: dagre lays the nodes out at their present sizes (an open dataset is tall), the jobs of a
  // parent's runs inside its group; left to right or top to bottom, whichever shows the whole graph larger.
  // Only groups that hold something are drawn (and given to dagre, which has no place for an empty one).
  function usedGroups() {
    const used = new Set();
    for (const entry of [...nodes.values(), ...groups.values()]) {
      for (let up = entry.item.parent; up && groups.has(up) && !used.has(up); up = groups.get(up).item.parent) {
        used.add(up);
      }
    }
    return used;
  }
  // Flat (groups drawn around wherever their members fell) or compound (dagre keeps each group's members
  // together, at the cost of room: its borders take layers and gaps of their own).
  function placed(rankdir, compound) {
    const graph = new dagre.graphlib.Graph({ compound });
    const used = usedGroups();
    graph.setGraph({
      rankdir,
      // Flat, two rows of different groups are this far apart: room for both boxes and a name between.
      nodesep: used.size && !compound ? FLAT_GAP : NODE_GAP,
      ranksep: LAYER_GAP,
      edgesep: EDGE_GAP,
      marginx: MARGIN,
      marginy: MARGIN,
    });
    graph.setDefaultEdgeLabel(() => ({}));
    for (const [id, node] of nodes) {
      graph.setNode(id, { width: node.width, height: node.height });
    }
    if (compound) {
      for (const id of used) {
        graph.setNode(id, {});
      }
      for (const entry of [...nodes.values(), ...groups.values()]) {
        if (used.has(entry.item.parent) && (nodes.has(entry.item.id) || used.has(entry.item.id))) {
          graph.setParent(entry.item.id, entry.item.parent);
        }
      }
    }
    for (const edge of edges) {
      graph.setEdge(edge.source.item.id, edge.target.item.id);
    }
    dagre.layout(graph);
    return { graph, used, rankdir };
  }
  function apply(result) {
    const graph = result.graph;
    direction = result.rankdir;
    for (const [id, node] of nodes) {
      const at = graph.node(id);
      node.centre = direction === "LR" ? at.x : at.y; // the nodes of one layer share it
      node.x = at.x - node.width / 2;
      node.y = at.y - node.height / 2;
    }
    for (const [id, group] of groups) {
      group.placed = result.used.has(id);
      group.element.style.display = group.placed ? "" : "none";
    }
    groupBoxes();
    for (const edge of edges) {
      // The bends dagre routed the edge through, between the layers it crosses.
      edge.bends = (graph.edge(edge.source.item.id, edge.target.item.id).points || []).slice(1, -1);
    }
  }
  function within(id, group) {
    for (let up = id; up; up = (nodes.get(up) || groups.get(up)).item.parent) {
      if (up === group) {
        return true;
      }
    }
    return false;
  }
  function meet(a, b) {
    return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
  }
  // Whether a group's box (with its name) reaches over something it does not hold.
  function clashes() {
    const drawn = Array.from(groups.values()).filter((group) => group.placed);
    for (const group of drawn) {
      const box = { ...group, y: group.y - GROUP_HEADER };
      for (const other of [...nodes.values(), ...drawn]) {
        const id = other.item.id;
        if (id !== group.item.id && !within(id, group.item.id) && !within(group.item.id, id) && meet(box, other)) {
          return true;
        }
      }
    }
    return false;
  }
  function scale(area) {
    const box = bounds();
    return Math.min(area.width / (box.right - box.left), area.height / (box.bottom - box.top));
  }
  function layout() {
    if (arrangement) {
      apply(placed(arrangement.rankdir, arrangement.compound));
      if (!arrangement.compound && clashes()) {
        // An open dataset grew into a group it is not in: from now on dagre keeps the groups apart.
        arrangement.compound = true;
        svg.setAttribute("data-layout", "compound");
        apply(placed(arrangement.rankdir, true));
      }
      return;
    }
    // Each direction flat, or compound where flat boxes would clash; keep the one the fitted view draws
    // largest (left to right when it is a tie).
    const area = svg.getBoundingClientRect();
    let best = null;
    for (const rankdir of ["LR", "TB"]) {
      let candidate = placed(rankdir, false);
      apply(candidate);
      if (usedGroups().size && clashes()) {
        candidate = placed(rankdir, true);
        apply(candidate);
      }
      const k = scale(area);
      if (!best || k > best.k * 1.05) {
        best = { k, candidate };
      }
    }
    arrangement = { rankdir: best.candidate.rankdir, compound: best.candidate.graph.isCompound() };
    svg.setAttribute("data-direction", arrangement.rankdir);
    svg.setAttribute("data-layout", arrangement.compound ? "compound" : "flat");
    apply(best.candidate);
  }
  // A group's box: around what it holds (nested groups first), with room above for its name (a legend on the
  // top border).
  function groupBoxes() {
    const boxes = new Map();
    const boxOf = (id, seen) => {
      if (boxes.has(id)) {
        return boxes.get(id);
      }
      const box = { left: Infinity, top: Infinity, right: -Infinity, bottom: -Infinity };
      for (const entry of [...nodes.values(), ...groups.values()]) {
        if (entry.item.parent !== id || seen.has(entry.item.id)) {
          continue;
        }
        const inner = nodes.has(entry.item.id)
          ? { left: entry.x, top: entry.y, right: entry.x + entry.width, bottom: entry.y + entry.height }
          : entry.placed && boxOf(entry.item.id, new Set([...seen, entry.item.id]));
        if (inner) {
          box.left = Math.min(box.left, inner.left - GROUP_PAD);
          box.top = Math.min(box.top, inner.top - GROUP_PAD - GROUP_HEADER);
          box.right = Math.max(box.right, inner.right + GROUP_PAD);
          box.bottom = Math.max(box.bottom, inner.bottom + GROUP_PAD);
        }
      }
      boxes.set(id, box);
      return box;
    };
    for (const [id, group] of groups) {
      if (!group.placed) {
        continue;
      }
      const box = boxOf(id, new Set([id]));
      Object.assign(group, { x: box.left, y: box.top, width: box.right - box.left, height: box.bottom - box.top });
    }
  }
  function reflow() {
    layout();
    for (const node of nodes.values()) {
      node.element.setAttribute("transform", `translate(${node.x},${node.y})`);
    }
    for (const group of groups.values()) {
      if (group.placed) {
        group.element.setAttribute("transform", `translate(${group.x},${group.y})`);
        group.box.setAttribute("width", group.width);
        group.box.setAttribute("height", group.height);
      }
    }
    for (const edge of edges) {
      edge.path.setAttribute("d", route(exitOf(edge.source), edge.bends, entryOf(edge.target)));
    }
    if (selection?.field) {
      drawColumnEdges();
    }
  }
  // Where an edge leaves a node and enters the next: its right and left sides, or its bottom and top.
  function exitOf(node) {
    if (direction === "LR") {
      return [node.x + node.width, node.y + HEADER / 2];
    }
    return [node.x + node.width / 2, node.y + node.height];
  }
  function entryOf(node) {
    return direction === "LR" ? [node.x, node.y + HEADER / 2] : [node.x + node.width / 2, node.y];
  }
  function point(at) {
    return `${at[0]},${at[1]}`;
  }
  function bezier(from, to) {
    const bend = Math.max(40, Math.abs(to[0] - from[0]) / 2);
    return ` C${point([from[0] + bend, from[1]])} ${point([to[0] - bend, to[1]])} ${point(to)}`;
  }
  function curve(from, to) {
    return `M${point(from)}${bezier(from, to)}`;
  }
  // Through dagre's bends, each stretch a curve that leaves and arrives along the direction of the layers.
  function route(from, bends, to) {
    const stops = [from, ...bends.map((bend) => [bend.x, bend.y]), to];
    const axis = direction === "LR" ? 0 : 1;
    let path = `M${point(from)}`;
    for (let index = 1; index < stops.length; index += 1) {
      const before = stops[index - 1];
      const at = stops[index];
      const bend = (at[axis] - before[axis]) / 2;
      const first = [...before];
      const second = [...at];
      first[axis] += bend;
      second[axis] -= bend;
      path += ` C${point(first)} ${point(second)} ${point(at)}`;
    }
    return path;
  }
  function rowAnchor(node, field, side) {
    const index = node.item.columns.findIndex((column) => column.name === field);
    const y = index < 0 ? node.y + HEADER / 2 : node.y + HEADER + index * ROW + ROW / 2;
    return [side === "right" ? node.x + node.width : node.x, y];
  }

  for (const item of data.edges) {
    const source = nodes.get(item.source);
    const target = nodes.get(item.target);
    if (!source || !target) {
      continue;
    }
    const failed = (source.item.kind === "job" ? source : target).item.failed;
    const path = svgElement(
      "path",
      {
        class: `edge${failed ? " failed" : ""}`,
        "marker-end": "url(#arrow)",
        "data-source": item.source,
        "data-target": item.target,
      },
      edgeLayer,
    );
    edges.push({ source, target, path, bends: [] });
  }
  for (const node of nodes.values()) {
    drawNode(node);
  }
  for (const group of groups.values()) {
    drawGroup(group);
  }
  roomForGroupNames();

  // ---- column lineage: everything a column comes from, across jobs
  function upstream(nodeId, field) {
    const seen = new Set([fieldKey(nodeId, field)]);
    const queue = [[nodeId, field]];
    const found = [];
    while (queue.length) {
      const [id, name] = queue.shift();
      const own = byField.get(fieldKey(id, name)) || [];
      const shared = indirectBox.checked ? byDataset.get(id) || [] : [];
      for (const edge of own.concat(shared)) {
        if (!indirectBox.checked && edge.type !== "DIRECT") {
          continue;
        }
        // A dataset-wide input shapes every column: it is drawn once, to the dataset itself.
        found.push({ edge, targetField: edge.targetField === null ? null : name });
        const key = fieldKey(edge.source, edge.sourceField);
        if (!seen.has(key)) {
          seen.add(key);
          queue.push([edge.source, edge.sourceField]);
        }
      }
    }
    return found;
  }

  // One drawn line per source column, target column and job; DIRECT wins when both kinds link them.
  function mergeLinks(found) {
    const merged = new Map();
    for (const link of found) {
      const edge = link.edge;
      const key = [edge.source, edge.sourceField, edge.target, link.targetField, edge.job].join("\u0000");
      let entry = merged.get(key);
      if (!entry) {
        entry = { edge, targetField: link.targetField, direct: false, kinds: [] };
        merged.set(key, entry);
      }
      entry.direct = entry.direct || edge.type === "DIRECT";
      const kind = `${edge.type} ${edge.subtype}${edge.masking ? " masking" : ""}`;
      if (!entry.kinds.includes(kind)) {
        entry.kinds.push(kind);
      }
    }
    return Array.from(merged.values());
  }

  function drawColumnEdges() {
    columnLayer.replaceChildren();
    for (const link of selection.links) {
      const edge = link.edge;
      const source = nodes.get(edge.source);
      const target = nodes.get(edge.target);
      const job = nodes.get(edge.job);
      if (!source || !target) {
        continue;
      }
      const from = rowAnchor(source, edge.sourceField, "right");
      let to = rowAnchor(target, link.targetField, "left");
      let d = curve(from, to);
      if (direction === "TB" || Math.abs(target.centre - source.centre) < 0.5) {
        // Layers top to bottom, or written and read inside one job (a temp table, both in one layer):
        // link the rows' right sides.
        to = rowAnchor(target, link.targetField, "right");
        const reach = Math.max(from[0], to[0]) + 50;
        d = `M${point(from)} C${point([reach, from[1]])} ${point([reach, to[1]])} ${point(to)}`;
      } else if (job && job.x > from[0] && job.x + job.width < to[0]) {
        // Through the job that made the link: in at its left, out at its right (hidden under the node).
        const middle = job.y + job.height / 2;
        const into = [job.x, middle];
        const out = [job.x + job.width, middle];
        d = `M${point(from)}${bezier(from, into)} L${point(out)}${bezier(out, to)}`;
      }
      const path = svgElement(
        "path",
        {
          class: `column-edge ${link.direct ? "direct" : "indirect"}`,
          d,
          "data-source": edge.source,
          "data-source-field": edge.sourceField,
          "data-target": edge.target,
          "data-target-field": link.targetField === null ? "" : link.targetField,
          "data-job": edge.job,
        },
        columnLayer,
      );
      svgElement("title", {}, path).textContent =
        `${source.item.name}.${edge.sourceField} \u2192 ${columnName(target.item.name, link.targetField)}: ` +
        `${link.kinds.join(", ")} (job ${job ? job.item.name : edge.job})`;
    }
  }

  function clearSelection() {
    selection = null;
    columnLayer.replaceChildren();
    svg.classList.remove("focus");
    for (const element of document.querySelectorAll(".on-path, .selected, .column-row.upstream, .column-row.chosen")) {
      element.classList.remove("on-path", "selected", "upstream", "chosen");
    }
  }

  function selectColumn(nodeId, field, updateAddress) {
    const node = nodes.get(nodeId);
    if (!node) {
      return;
    }
    clearSelection();
    const links = mergeLinks(upstream(nodeId, field));
    selection = { node, field, links };
    setExpanded(node, true);
    const onPath = new Set([nodeId]);
    for (const link of links) {
      for (const id of [link.edge.source, link.edge.target, link.edge.job]) {
        onPath.add(id);
      }
      setExpanded(nodes.get(link.edge.source) || node, true);
      setExpanded(nodes.get(link.edge.target) || node, true);
    }
    reflow();
    for (const id of onPath) {
      nodes.get(id)?.element.classList.add("on-path");
    }
    for (const edge of edges) {
      if (onPath.has(edge.source.item.id) && onPath.has(edge.target.item.id)) {
        edge.path.classList.add("on-path");
      }
    }
    svg.classList.add("focus");
    node.element.classList.add("selected");
    node.rows?.get(field)?.classList.add("chosen");
    for (const link of links) {
      nodes.get(link.edge.source)?.rows?.get(link.edge.sourceField)?.classList.add("upstream");
    }
    showColumn(node, field, links);
    if (updateAddress) {
      setAddress({ dataset: node.item.name, column: field });
    }
  }

  function toggleDataset(node) {
    const open = !node.expanded;
    if (selection?.field && !open) {
      clearSelection();
    }
    // The layout changes with the node's height: keep the clicked node where it was on the screen.
    const before = [node.x, node.y];
    setExpanded(node, open);
    reflow();
    view.x += (before[0] - node.x) * view.k;
    view.y += (before[1] - node.y) * view.k;
    applyView();
    for (const element of document.querySelectorAll(".node.selected")) {
      element.classList.remove("selected");
    }
    node.element.classList.add("selected");
    showDataset(node.item);
  }

  // ---- the side panel and the job tooltip
  function panel(kind) {
    details.replaceChildren();
    details.hidden = false;
    details.className = kind || "";
    const close = htmlElement("button", "\u00d7", "close", details);
    close.type = "button";
    close.title = "Hide this panel";
    close.addEventListener("click", () => {
      details.hidden = true;
    });
    return details;
  }
  function neighbours(id, incoming) {
    return data.edges
      .filter((edge) => (incoming ? edge.target : edge.source) === id)
      .map((edge) => nodes.get(incoming ? edge.source : edge.target))
      .filter(Boolean);
  }
  function entryOfId(id) {
    return nodes.get(id) || groups.get(id);
  }
  function nodeLinks(title, list, parent, whole) {
    if (!list.length) {
      return;
    }
    htmlElement("h3", title, null, parent);
    const ul = htmlElement("ul", null, null, parent);
    for (const node of list) {
      const li = htmlElement("li", null, null, ul);
      const button = htmlElement("button", whole ? node.item.name : node.item.label, "link", li);
      button.title = node.item.name;
      button.type = "button";
      button.addEventListener("click", () => {
        focusNode(node);
        if (node.item.group) {
          showJob(node.item);
        } else {
          node.element.dispatchEvent(new MouseEvent("click"));
        }
      });
    }
  }
  function showHelp() {
    const box = panel("help");
    htmlElement("h2", data.title, null, box);
    const jobs = data.nodes.filter((n) => n.kind === "job");
    const failed = jobs.filter((n) => n.failed);
    const counts =
      `${plural(data.nodes.length - jobs.length, "dataset")}, ${plural(jobs.length, "job")} ` +
      `(${plural(groups.size, "parent")} drawn as groups), ` +
      plural(data.columnEdges.length, "column edge") +
      (failed.length ? `; ${failed.length} failed` : "");
    htmlElement("p", `${counts}.`, null, box);
    htmlElement(
      "p",
      "Click a dataset for its columns, a column for where it comes from " +
        "(DIRECT solid, INDIRECT dashed). Hover a job for its SQL. Drag to pan, scroll to zoom.",
      "muted",
      box,
    );
    nodeLinks(
      "Failed jobs",
      failed.map((n) => entryOfId(n.id)),
      box,
      true,
    );
  }
  function showDataset(item) {
    const box = panel();
    htmlElement("h2", item.name, null, box);
    htmlElement("div", item.namespace, "muted", box);
    htmlElement("h3", plural(item.columns.length, "column"), null, box);
    const ul = htmlElement("ul", null, null, box);
    for (const column of item.columns) {
      const li = htmlElement("li", null, null, ul);
      const button = htmlElement("button", column.name, "link", li);
      button.type = "button";
      button.addEventListener("click", () => selectColumn(item.id, column.name, true));
      if (column.type) {
        htmlElement("span", ` ${column.type}`, "muted", li);
      }
    }
    showChecks(item, box);
    nodeLinks("Written by", neighbours(item.id, true), box);
    nodeLinks("Read by", neighbours(item.id, false), box);
  }
  // The latest checks of the dataset's new version: each rule, failed ones first.
  function showChecks(item, box) {
    if (!item.checks || !item.checks.length) {
      return;
    }
    const failed = item.failedChecks.length;
    htmlElement("h3", `Quality checks: ${failed ? `${failed} of ${item.checks.length} failed` : "all passed"}`, null, box);
    const ul = htmlElement("ul", null, "checks", box);
    const ordered = item.checks.filter((c) => !c.success).concat(item.checks.filter((c) => c.success));
    for (const check of ordered) {
      const li = htmlElement("li", null, check.success ? "check passed" : "check failed", ul);
      htmlElement("span", `${check.success ? "\u2713" : "\u2717"} ${check.rule}`, "rule", li);
      const facts = [check.severity, check.actual === null ? null : `metric ${check.actual}`].filter((f) => f);
      if (facts.length) {
        htmlElement("span", ` (${facts.join(", ")})`, "muted", li);
      }
    }
  }
  function showColumn(node, field, links) {
    const box = panel();
    htmlElement("h2", `${node.item.name}.${field}`, null, box);
    htmlElement("div", node.item.namespace, "muted", box);
    htmlElement("h3", links.length ? "Comes from" : "No upstream columns known", null, box);
    const ul = htmlElement("ul", null, null, box);
    for (const link of links) {
      const source = nodes.get(link.edge.source);
      const target = nodes.get(link.edge.target);
      const job = nodes.get(link.edge.job);
      const li = htmlElement("li", null, "upstream-link", ul);
      htmlElement("span", `${source ? source.item.name : link.edge.source}.${link.edge.sourceField}`, null, li);
      const targetName = target ? target.item.name : link.edge.target;
      htmlElement("span", ` \u2192 ${columnName(targetName, link.targetField)} `, null, li);
      htmlElement("span", link.kinds.join(", "), link.direct ? "direct" : "indirect", li);
      htmlElement("div", `via ${job ? job.item.name : link.edge.job}`, "muted", li);
    }
  }
  function jobFacts(item, parent) {
    const state = htmlElement("div", null, null, parent);
    htmlElement("span", item.state || "no state", `state${item.failed ? " failed" : ""}`, state);
    const runs = plural(item.runs, "run") + (item.failedRuns ? `, ${item.failedRuns} failed` : "");
    htmlElement("span", ` \u00b7 ${runs}${item.eventTime ? ` \u00b7 ${item.eventTime}` : ""}`, "muted", state);
    if (item.error) {
      htmlElement("div", item.error, "error", parent);
    }
    if (item.sql) {
      htmlElement("pre", item.sql, null, parent);
    }
  }
  function showJob(item) {
    const box = panel();
    htmlElement("h2", item.name, null, box);
    htmlElement("div", item.namespace + (item.runId ? ` \u00b7 run ${item.runId}` : ""), "muted", box);
    jobFacts(item, box);
    nodeLinks("Reads", neighbours(item.id, true), box);
    nodeLinks("Writes", neighbours(item.id, false), box);
  }
  function showJobTip(item, event) {
    tooltip.replaceChildren();
    htmlElement("strong", item.name, null, tooltip);
    const sql = item.sql && item.sql.length > 1500 ? `${item.sql.slice(0, 1500)}\n\u2026` : item.sql;
    jobFacts({ ...item, runId: undefined, sql }, tooltip);
    tooltip.hidden = false;
    placeTip(event);
  }
  function placeTip(event) {
    const area = svg.getBoundingClientRect();
    const left = event.clientX - area.left + 14;
    const top = event.clientY - area.top + 14;
    tooltip.style.left = `${Math.max(0, Math.min(left, area.width - tooltip.offsetWidth - 4))}px`;
    tooltip.style.top = `${Math.max(0, Math.min(top, area.height - tooltip.offsetHeight - 4))}px`;
  }

  // ---- search
  function applySearch() {
    const query = search.value.trim().toLowerCase();
    let shown = 0;
    for (const node of nodes.values()) {
      const match =
        !query || node.item.name.toLowerCase().includes(query) || node.item.namespace.toLowerCase().includes(query);
      node.matches = match;
      node.element.classList.toggle("filtered-out", !match);
      if (match) {
        shown += 1;
      }
    }
    for (const edge of edges) {
      edge.path.classList.toggle("filtered-out", !(edge.source.matches && edge.target.matches));
    }
    summary.textContent = query
      ? `${shown} of ${plural(nodes.size, "node")} match`
      : `${plural(nodes.size, "node")}, ${plural(edges.length, "edge")}`;
  }
  search.addEventListener("input", () => {
    applySearch();
    setAddress(search.value ? { search: search.value } : {});
  });
  search.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      search.value = "";
      applySearch();
      setAddress({});
    }
    if (event.key === "Enter") {
      const first = Array.from(nodes.values()).find((node) => node.matches);
      if (first) {
        focusNode(first);
      }
    }
  });
  indirectBox.addEventListener("change", () => {
    if (selection?.field) {
      selectColumn(selection.node.item.id, selection.field, false);
    }
  });

  // ---- pan and zoom
  function applyView() {
    viewport.setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.k})`);
  }
  function bounds() {
    const box = { left: Infinity, top: Infinity, right: -Infinity, bottom: -Infinity };
    for (const node of [...nodes.values(), ...Array.from(groups.values()).filter((group) => group.placed)]) {
      box.left = Math.min(box.left, node.x);
      box.top = Math.min(box.top, node.y);
      box.right = Math.max(box.right, node.x + node.width);
      box.bottom = Math.max(box.bottom, node.y + node.height);
    }
    return box;
  }
  // The whole graph as large as it fits, never below READABLE: a graph too large for that shows its start
  // (top left) and is panned from there. On the first view the panel gives way when the graph needs its room.
  function fit(first) {
    const area = svg.getBoundingClientRect();
    if (!nodes.size || !area.width || !area.height) {
      return;
    }
    const box = bounds();
    const pad = 20;
    const wide = box.right - box.left;
    const high = box.bottom - box.top;
    const zoom = (room) => Math.min((room - 2 * pad) / wide, (area.height - 2 * pad) / high, MAX_ZOOM);
    const beside = area.width - details.offsetWidth - 20;
    const alone = Math.max(READABLE, Math.min(1, zoom(area.width)));
    if (first === true && details.className === "help" && wide * alone + 2 * pad > beside) {
      details.hidden = true;
    }
    // Leave the panel its room on the right while there is enough left for the graph.
    const room = details.hidden || area.width < 900 ? area.width : beside;
    view.k = Math.max(READABLE, zoom(room));
    view.x = Math.max(pad, (room - wide * view.k) / 2) - box.left * view.k;
    view.y = Math.max(pad, (area.height - high * view.k) / 2) - box.top * view.k;
    applyView();
  }
  function focusNode(node) {
    const area = svg.getBoundingClientRect();
    view.k = Math.max(view.k, 0.8);
    view.x = area.width / 2 - (node.x + node.width / 2) * view.k;
    view.y = area.height / 2 - (node.y + node.height / 2) * view.k;
    applyView();
    node.element.focus({ preventScroll: true });
  }
  svg.addEventListener(
    "wheel",
    (event) => {
      event.preventDefault();
      const area = svg.getBoundingClientRect();
      const k = Math.min(4, Math.max(0.1, view.k * Math.exp(-event.deltaY * 0.0015)));
      const mx = event.clientX - area.left;
      const my = event.clientY - area.top;
      view.x = mx - (mx - view.x) * (k / view.k);
      view.y = my - (my - view.y) * (k / view.k);
      view.k = k;
      applyView();
    },
    { passive: false },
  );
  let drag = null;
  svg.addEventListener("pointerdown", (event) => {
    if (event.target.closest?.(".node")) {
      return;
    }
    drag = { x: event.clientX, y: event.clientY, moved: false };
    svg.setPointerCapture(event.pointerId);
  });
  svg.addEventListener("pointermove", (event) => {
    if (!drag) {
      return;
    }
    const dx = event.clientX - drag.x;
    const dy = event.clientY - drag.y;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 3) {
      return;
    }
    drag.moved = true;
    svg.classList.add("panning");
    view.x += dx;
    view.y += dy;
    drag.x = event.clientX;
    drag.y = event.clientY;
    applyView();
  });
  svg.addEventListener("pointerup", () => {
    if (drag && !drag.moved) {
      clearSelection();
      showHelp();
      setAddress({});
    }
    drag = null;
    svg.classList.remove("panning");
  });
  document.getElementById("fit").addEventListener("click", () => fit(false));

  // ---- the address: #dataset=NAME&column=FIELD selects a column, #search=TEXT filters
  function setAddress(params) {
    const text = new URLSearchParams(params).toString();
    try {
      history.replaceState(null, "", text ? `#${text}` : location.pathname + location.search);
    } catch {
      // A browser may refuse it for file: pages; the address is only a convenience.
    }
  }
  function findDataset(name) {
    return (
      nodes.get(name) ||
      Array.from(nodes.values()).find((node) => node.item.kind === "dataset" && node.item.name === name) ||
      Array.from(nodes.values()).find((node) => node.item.kind === "dataset" && node.item.label === name)
    );
  }
  function fromAddress() {
    const params = new URLSearchParams(location.hash.replace(/^#/, ""));
    if (params.get("search")) {
      search.value = params.get("search");
    }
    applySearch();
    const dataset = params.get("dataset") && findDataset(params.get("dataset"));
    if (dataset && params.get("column")) {
      selectColumn(dataset.item.id, params.get("column"), false);
    } else if (dataset) {
      toggleDataset(dataset);
    } else {
      showHelp();
    }
  }

  reflow();
  fromAddress();
  fit(true);
  window.addEventListener("resize", () => fit(false));
  document.body.setAttribute("data-rendered", String(nodes.size));
})();
