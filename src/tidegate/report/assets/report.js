/* tidegate report and live UI. Everything shown comes from the JSON data block and is written
   as text (textContent, never parsed as markup). Heatmaps are drawn on one canvas per model from
   run-length segments, so a long history costs no DOM. */
(function () {
  "use strict";
  var started = performance.now();
  var DAY = 86400, HOUR = 3600;
  var MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  var boot = readJson("tidegate-boot");
  var view = readJson("tidegate-data");
  var etag = view.etag ? "\"" + view.etag + "\"" : null;
  var colours = {};
  var drawn = [];        // per model: {m, canvas, L, g}
  var selected = null;   // {model, label}
  var updatedAt = new Date();
  var offline = false;

  function readJson(id) { return JSON.parse(document.getElementById(id).textContent); }
  function $(id) { return document.getElementById(id); }

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  function clear(node) { while (node.firstChild) { node.removeChild(node.firstChild); } }

  // Times arrive in UTC to the second (report/data.py); a partition's details from the live
  // server carry the ledger's microseconds, cut here the same way.
  function when(t) {
    if (!t) { return ""; }
    return String(t).replace(/^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(\.\d+)?(Z|\+00:00)$/, "$1 $2 UTC");
  }

  function pad(n) { return n < 10 ? "0" + n : String(n); }

  function swatch(state) { return el("i", "sw s-" + state + (state === "missing" ? " missing" : "")); }

  // ---- partitions: labels and places of cells --------------------------------------------
  function monthIndex(ts) { var d = new Date(ts * 1000); return d.getUTCFullYear() * 12 + d.getUTCMonth(); }

  function dayText(ts) {
    var d = new Date(ts * 1000);
    return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate());
  }

  function label(m, i) {
    if (m.grain === "day") { return dayText(m.first + i * DAY); }
    if (m.grain === "hour") {
      var ts = m.first + i * HOUR;
      return dayText(ts) + "T" + pad(new Date(ts * 1000).getUTCHours());
    }
    if (m.grain === "month") {
      var k = monthIndex(m.first) + i;
      return Math.floor(k / 12) + "-" + pad(k % 12 + 1);
    }
    if (m.grain === "range") { return String(m.first + i * m.chunk_size); }
    return i < m.keys.length ? m.keys[i] : "#" + (m.first + i);
  }

  function ordinalOf(m, text) {
    for (var i = 0; i < m.n; i++) { if (label(m, i) === text) { return i; } }
    return -1;
  }

  // A calendar: columns and rows, and the cell at each place.
  function layout(m) {
    var per, off;
    if (m.grain === "day" || m.grain === "hour") {
      per = m.grain === "day" ? 7 : 24;
      off = m.grain === "day" ? (Math.floor(m.first / DAY) + 3) % 7 : Math.floor(m.first / HOUR) % 24;
      return {
        cols: Math.max(1, Math.ceil((m.n + off) / per)), rows: per, left: 30, top: 14,
        col: function (i) { return Math.floor((i + off) / per); },
        row: function (i) { return (i + off) % per; },
        at: function (c, r) { return c * per + r - off; }
      };
    }
    if (m.grain === "month") {
      off = monthIndex(m.first) % 12;
      return {
        cols: 12, rows: Math.max(1, Math.ceil((m.n + off) / 12)), left: 36, top: 14,
        col: function (i) { return (i + off) % 12; },
        row: function (i) { return Math.floor((i + off) / 12); },
        at: function (c, r) { return r * 12 + c - off; }
      };
    }
    per = Math.max(1, Math.min(m.n, 48));
    return {
      cols: per, rows: Math.max(1, Math.ceil(m.n / per)), left: 0, top: 0,
      col: function (i) { return i % per; },
      row: function (i) { return Math.floor(i / per); },
      at: function (c, r) { return r * per + c; }
    };
  }

  function geometry(L, width) {
    var pitch = Math.max(4, Math.min(16, Math.floor((width - L.left) / L.cols)));
    var size = pitch >= 6 ? pitch - 1 : pitch;
    return { pitch: pitch, size: size, width: L.left + L.cols * pitch, height: L.top + L.rows * pitch };
  }

  // ---- segments: the state and writer of a cell ------------------------------------------
  function index(m) {
    if (m._starts) { return; }
    var count = m.segments.length / 3, at = 0;
    m._starts = new Int32Array(count + 1);
    for (var k = 0; k < count; k++) { m._starts[k] = at; at += m.segments[3 * k + 2]; }
    m._starts[count] = at;
  }

  function segmentOf(m, i) {
    index(m);
    var lo = 0, hi = m._starts.length - 2;
    while (lo < hi) {
      var mid = (lo + hi + 1) >> 1;
      if (m._starts[mid] <= i) { lo = mid; } else { hi = mid - 1; }
    }
    return lo;
  }

  function cellOf(m, i) {
    var k = segmentOf(m, i);
    return { state: view.states[m.segments[3 * k]], version: m.segments[3 * k + 1] };
  }

  function versionText(v) {
    if (v < 0 || !view.versions[v]) { return "—"; }
    var version = view.versions[v];
    return "v" + version.seq + " (" + version.id + ")" + (version.active ? " active" : "");
  }

  // ---- drawing ---------------------------------------------------------------------------
  function drawLabels(c2, m, L, g) {
    c2.fillStyle = "#59636e";
    c2.font = "10px system-ui, sans-serif";
    c2.textBaseline = "top";
    if (m.grain === "day") {
      [[0, "Mon"], [2, "Wed"], [4, "Fri"]].forEach(function (p) {
        c2.fillText(p[1], 0, L.top + p[0] * g.pitch - 1);
      });
      var first = monthIndex(m.first), last = monthIndex(m.first + (m.n - 1) * DAY), free = 0;
      for (var k = first; k <= last; k++) {
        var at = Math.max(0, Math.round((Date.UTC(Math.floor(k / 12), k % 12, 1) / 1000 - m.first) / DAY));
        var x = L.left + L.col(at) * g.pitch;
        var text = MONTHS[k % 12] + (k % 12 === 0 || k === first ? " " + Math.floor(k / 12) : "");
        if (x < free) { continue; }
        c2.fillText(text, x, 0);
        free = x + c2.measureText(text).width + 6;
      }
    } else if (m.grain === "hour") {
      [0, 6, 12, 18].forEach(function (h) { c2.fillText(h + "h", 0, L.top + h * g.pitch - 1); });
      var room = 0;
      for (var c = 0; c < L.cols; c++) {
        var x2 = L.left + c * g.pitch, i = Math.max(0, L.at(c, 0));
        if (x2 < room || i >= m.n) { continue; }
        var day = label(m, i).slice(5, 10);
        c2.fillText(day, x2, 0);
        room = x2 + c2.measureText(day).width + 8;
      }
    } else if (m.grain === "month") {
      for (var col = 0; col < 12; col++) { c2.fillText(MONTHS[col].charAt(0), L.left + col * g.pitch, 0); }
      var year = Math.floor(monthIndex(m.first) / 12);
      for (var r = 0; r < L.rows; r++) { c2.fillText(String(year + r), 0, L.top + r * g.pitch); }
    }
  }

  function drawModel(d) {
    var m = d.m, L = d.L, g = d.g, canvas = d.canvas;
    var ratio = window.devicePixelRatio || 1;
    canvas.width = Math.ceil(g.width * ratio);
    canvas.height = Math.ceil(g.height * ratio);
    canvas.style.width = g.width + "px";
    canvas.style.height = g.height + "px";
    var c2 = canvas.getContext("2d");
    c2.setTransform(ratio, 0, 0, ratio, 0, 0);
    drawLabels(c2, m, L, g);
    var seg = m.segments, i = 0;
    for (var k = 0; k < seg.length; k += 3) {
      c2.fillStyle = colours[view.states[seg[k]]];
      for (var end = i + seg[k + 2]; i < end; i++) {
        c2.fillRect(L.left + L.col(i) * g.pitch, L.top + L.row(i) * g.pitch, g.size, g.size);
      }
    }
    if (selected && selected.model === m.name) {
      var at = ordinalOf(m, selected.label);
      if (at >= 0) {
        c2.strokeStyle = "#1f2328";
        c2.lineWidth = 2;
        c2.strokeRect(L.left + L.col(at) * g.pitch - 1, L.top + L.row(at) * g.pitch - 1, g.size + 2, g.size + 2);
      }
    }
  }

  function hit(d, event) {
    var rect = d.canvas.getBoundingClientRect();
    var c = Math.floor((event.clientX - rect.left - d.L.left) / d.g.pitch);
    var r = Math.floor((event.clientY - rect.top - d.L.top) / d.g.pitch);
    if (c < 0 || r < 0 || c >= d.L.cols || r >= d.L.rows) { return -1; }
    var i = d.L.at(c, r);
    return i >= 0 && i < d.m.n ? i : -1;
  }

  function tipText(m, i) {
    var cell = cellOf(m, i), lines = [m.name + " " + label(m, i) + ": " + cell.state];
    if (cell.version >= 0) { lines.push("published by " + versionText(cell.version)); }
    if (m.details) {
      var run = m.details.run[i], sum = m.details.checksum[i];
      if (run >= 0) { lines.push("run " + view.run_ids[run]); }
      if (sum) { lines.push("rows " + sum.split(":")[0] + ", checksum " + sum); }
    }
    lines.push("click for details");
    return lines.join("\n");
  }

  function showTip(event, text) {
    var tip = $("tip");
    tip.textContent = text;
    tip.hidden = false;
    tip.style.left = Math.min(event.clientX + 14, window.innerWidth - 300) + "px";
    tip.style.top = (event.clientY + 14) + "px";
  }

  function hideTip() { $("tip").hidden = true; }

  // ---- the partitions section ------------------------------------------------------------
  function countList(counts, forModel) {
    var list = el("ul", "counts");
    view.states.forEach(function (state) {
      var item = el("li");
      item.setAttribute("data-state", state);
      item.setAttribute("data-count", String(counts[state] || 0));
      item.appendChild(swatch(state));
      item.appendChild(document.createTextNode(state + " " + (counts[state] || 0).toLocaleString("en-US")));
      if (forModel && !counts[state]) { item.className = "muted"; }
      list.appendChild(item);
    });
    return list;
  }

  function healthOf(m) {
    var box = el("div", "health");
    box.setAttribute("data-model", m.name);
    box.appendChild(el("p", "health-line", m.health.line));
    var bar = el("div", "health-bar");
    bar.setAttribute("aria-hidden", "true");
    m.health.bar.forEach(function (part) {
      var share = el("i", "s-" + part[0]);
      share.style.width = (part[1] * 100) + "%";
      bar.appendChild(share);
    });
    box.appendChild(bar);
    return box;
  }

  function renderModels() {
    var total = {};
    view.states.forEach(function (s) { total[s] = 0; });
    view.models.forEach(function (m) { view.states.forEach(function (s) { total[s] += m.counts[s] || 0; }); });
    var legend = $("legend");
    clear(legend);
    legend.appendChild(el("li", "muted", "all models:"));
    Array.prototype.slice.call(countList(total, false).childNodes).forEach(function (n) { legend.appendChild(n); });

    var holder = $("models");
    clear(holder);
    drawn = [];
    if (!view.models.length) { holder.appendChild(el("p", "empty", "no models in this project")); return; }
    var width = Math.max(320, holder.clientWidth || 900);
    view.models.forEach(function (m) {
      var card = el("article", "model");
      card.setAttribute("data-model", m.name);
      var head = el("h3", null, m.name);
      head.appendChild(el("span", "grain", m.grain + (m.n ? ", " + label(m, 0) + " … " + label(m, m.n - 1) : "")));
      head.appendChild(el("span", "badge", m.active >= 0 ? "active " + versionText(m.active).replace(" active", "") : "not deployed"));
      if (m.deploy === "pending") { head.appendChild(el("span", "badge warn", "deploy pending its first run")); }
      if (m.paused) { head.appendChild(el("span", "badge warn", "paused")); }
      card.appendChild(head);
      card.appendChild(healthOf(m));
      card.appendChild(countList(m.counts, true));
      var canvas = el("canvas");
      canvas.setAttribute("data-model", m.name);
      canvas.setAttribute("role", "img");
      canvas.setAttribute("aria-label", m.name + " partitions: " + view.states.map(function (s) {
        return s + " " + (m.counts[s] || 0);
      }).join(", "));
      card.appendChild(canvas);
      holder.appendChild(card);
      var L = layout(m), d = { m: m, canvas: canvas, L: L, g: geometry(L, width) };
      drawn.push(d);
      canvas.addEventListener("mousemove", function (event) {
        var i = hit(d, event);
        if (i < 0) { hideTip(); } else { showTip(event, tipText(m, i)); }
      });
      canvas.addEventListener("mouseleave", hideTip);
      canvas.addEventListener("click", function (event) {
        var i = hit(d, event);
        if (i >= 0) { select(d, i); }
      });
    });
    drawn.forEach(drawModel);
  }

  // ---- details of one partition ----------------------------------------------------------
  function addRow(dl, term, value) {
    dl.appendChild(el("dt", null, term));
    var dd = el("dd");
    if (value instanceof Node) { dd.appendChild(value); } else { dd.textContent = value === null || value === undefined ? "—" : String(value); }
    dl.appendChild(dd);
    return dd;
  }

  function checkList(items) {
    var list = el("ul");
    items.forEach(function (c) {
      var failed = c.passed === false;
      var item = el("li", failed ? (c.severity === "blocking" ? "fail" : "warn") : null);
      item.textContent = c.name + (c.passed === undefined ? "" : failed ? " — FAILED (" + c.severity + "): " : " — passed: ") + (c.message || "");
      list.appendChild(item);
    });
    return list;
  }

  function taintsAt(m, i) {
    return view.taints.filter(function (t) {
      return t.model === m.name && t.cells.some(function (span) { return span[0] <= i && i < span[1]; });
    });
  }

  function select(d, i) {
    selected = { model: d.m.name, label: label(d.m, i) };
    drawn.forEach(function (x) { if (x.m.name === d.m.name) { drawModel(x); } });
    showDetail(d.m, i);
  }

  function showDetail(m, i) {
    var box = $("detail"), body = $("detail-body"), cell = cellOf(m, i), text = label(m, i);
    clear(body);
    box.hidden = false;
    body.setAttribute("data-model", m.name);
    body.setAttribute("data-partition", text);
    body.setAttribute("data-state", cell.state);
    body.appendChild(el("h4", null, m.name + " " + text));
    var dl = el("dl");
    body.appendChild(dl);
    var state = el("span");
    state.appendChild(swatch(cell.state));
    state.appendChild(document.createTextNode(cell.state));
    addRow(dl, "state", state);
    if (cell.version >= 0) { addRow(dl, "version", versionText(cell.version)); }
    taintsAt(m, i).forEach(function (t) { addRow(dl, "taint", t.reason + " (declared on " + t.origin + ", " + t.taint_id + ")"); });
    if (cell.state === "queued") { addRow(dl, "note", "a running backfill has yet to write it"); }
    if (cell.state === "missing") {
      addRow(dl, "note", "no attempt recorded; due by " + when(view.as_of));
      return;
    }
    if (m.details) { staticDetail(dl, m, i, cell); } else if (boot.live) { liveDetail(dl, body, m, text); }
  }

  function staticDetail(dl, m, i, cell) {
    var run = m.details.run[i], sum = m.details.checksum[i];
    addRow(dl, "run", run >= 0 ? view.run_ids[run] : null);
    addRow(dl, "rows", sum ? Number(sum.split(":")[0]).toLocaleString("en-US") : null);
    addRow(dl, "checksum", sum || null).className = "mono";
    var failing = (m.details.checks[String(i)] || []).map(function (c) {
      return { name: c[0], severity: c[1], message: c[2], passed: false };
    });
    var declared = cell.version >= 0 ? view.versions[cell.version].checks : [];
    var failedNames = failing.map(function (c) { return c.name; });
    var passed = declared.filter(function (n) { return failedNames.indexOf(n) < 0; });
    var checks = el("div");
    if (failing.length) { checks.appendChild(checkList(failing)); }
    checks.appendChild(el("span", "muted", passed.length ? "passed: " + passed.join(", ") : (failing.length ? "" : "none declared")));
    addRow(dl, "checks", checks);
    var last = m.details.last[String(i)];
    if (last) {
      addRow(dl, "newest attempt", (last[0] >= 0 ? view.run_ids[last[0]] : "?") + " with " + versionText(last[1]) + (last[2] ? ": " + last[2] : ""));
    }
  }

  function liveDetail(dl, body, m, text) {
    var wait = addRow(dl, "details", "loading…");
    var url = "api/partition?model=" + encodeURIComponent(m.name) + "&partition=" + encodeURIComponent(text);
    fetch(url, { cache: "no-store" }).then(function (r) { return r.json(); }).then(function (doc) {
      if (body.getAttribute("data-partition") !== text || body.getAttribute("data-model") !== m.name) { return; }
      wait.previousSibling.remove();
      wait.remove();
      if (doc.schema !== "tidegate.partition/v1") { addRow(dl, "details", doc.error || "not found"); return; }
      var p = doc.published;
      if (p) {
        addRow(dl, "written by", "v" + p.version.seq + " (" + p.version.id + ")" + (p.version.git_commit ? ", commit " + p.version.git_commit.slice(0, 12) + (p.version.git_dirty ? " (dirty)" : "") : ""));
        addRow(dl, "run", p.run_id);
        addRow(dl, "attempt", p.attempt_id);
        addRow(dl, "published at", when(p.published_at));
        addRow(dl, "rows", p.rows === null ? null : p.rows.toLocaleString("en-US"));
        addRow(dl, "checksum", p.checksum).className = "mono";
        addRow(dl, "checks", p.checks.length ? checkList(p.checks) : "none declared");
        p.reconciliations.forEach(function (r) {
          addRow(dl, "reconciled " + r.name, r.source_value + " vs " + r.target_value + (r.passed ? " (ok)" : " (MISMATCH)"));
        });
      }
      var last = doc.last_attempt;
      if (last && (!p || last.attempt_id !== p.attempt_id)) {
        addRow(dl, "newest attempt", last.state + " in run " + last.run_id + (last.error ? ": " + last.error : ""));
        if (last.checks.length) { addRow(dl, "its checks", checkList(last.checks)); }
      }
      body.setAttribute("data-loaded", "1");
    }).catch(function () { wait.textContent = "could not load (is tidegate ui still running?)"; });
  }

  // ---- tables ----------------------------------------------------------------------------
  function table(node, headers, rows, empty) {
    clear(node);
    if (!rows.length) {
      var tr0 = el("tr");
      tr0.appendChild(el("td", "empty", empty));
      node.appendChild(tr0);
      return;
    }
    var head = el("tr");
    headers.forEach(function (h) { head.appendChild(el("th", null, h)); });
    node.appendChild(head);
    rows.forEach(function (cells) {
      var tr = el("tr", cells.cls);
      cells.forEach(function (c) {
        var td = el("td");
        if (c !== null && typeof c === "object" && !(c instanceof Node)) { td.className = c.cls; c = c.text; }
        if (c instanceof Node) { td.appendChild(c); } else { td.textContent = c === null || c === undefined ? "" : String(c); }
        tr.appendChild(td);
      });
      node.appendChild(tr);
    });
  }

  function duration(seconds) {
    if (seconds < 90) { return seconds.toFixed(1) + " s"; }
    if (seconds < 5400) { return (seconds / 60).toFixed(1) + " min"; }
    return (seconds / 3600).toFixed(1) + " h";
  }

  function runLine(r) {
    var a = r.attempts, parts = [];
    ["published", "failed", "skipped"].forEach(function (s) { if (a[s]) { parts.push(a[s] + " " + s); } });
    var live = (a.pending || 0) + (a.running || 0) + (a.staged || 0) + (a.audited || 0);
    if (live) { parts.push(live + " in flight"); }
    return parts.join(", ") || "no attempts";
  }

  function runReason(r) {
    var stop = r.trigger ? "stop-loss: " + r.trigger : "";
    if (!r.reason || r.reason.indexOf(r.trigger || "\u0000") >= 0) { return r.reason || stop; }
    return stop ? stop + "; " + r.reason : r.reason;
  }

  function renderRuns() {
    drawTimeline();
    table($("run-table"), ["run", "kind", "status", "models", "partitions", "started", "took", "attempts", "rows", "throughput", "stop-loss / reason"],
      view.runs.map(function (r) {
        return [{ text: r.run_id, cls: "mono" }, r.kind, r.status, r.models.join(", "), r.partitions, when(r.started_at),
          duration(r.seconds), runLine(r), { text: r.rows.toLocaleString("en-US"), cls: "num" },
          r.throughput || "",
          { text: runReason(r), cls: "wrap" }];
      }), "no runs yet");
  }

  var SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, text) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, String(attrs[k])); });
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function statusColour(status) {
    return { succeeded: colours.published, failed: colours.failed, running: colours.running }[status] || colours.skipped;
  }

  function drawTimeline() {
    var holder = $("timeline");
    clear(holder);
    var now = Date.parse(view.as_of);
    var runs = view.runs.slice().reverse().map(function (r) {
      var start = Date.parse(r.started_at);
      return { r: r, start: start, end: Math.max(start + r.seconds * 1000, start) };
    });
    if (!runs.length) { return; }
    var t0 = Math.min.apply(null, runs.map(function (x) { return x.start; }));
    var t1 = Math.max.apply(null, runs.map(function (x) { return x.end; }).concat([t0 + 1000]));
    if (runs.some(function (x) { return x.r.status === "running"; })) { t1 = Math.max(t1, now); }
    var lanes = [];
    runs.forEach(function (x) {
      var lane = 0;
      while (lane < lanes.length && lanes[lane] > x.start && lane < 11) { lane++; }
      lanes[lane] = Math.max(lanes[lane] || 0, x.end);
      x.lane = lane;
    });
    var width = Math.max(320, holder.clientWidth || 900), left = 8, right = 14, laneH = 20;
    var height = 26 + lanes.length * laneH;
    var scale = (width - left - right) / (t1 - t0);
    var root = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height, role: "img" });
    root.appendChild(svg("title", {}, view.runs.length + " runs from " + new Date(t0).toISOString() + " to " + new Date(t1).toISOString()));
    for (var k = 0; k <= 4; k++) {
      var t = t0 + (t1 - t0) * k / 4, x = left + (t - t0) * scale;
      root.appendChild(svg("line", { x1: x, y1: 16, x2: x, y2: height, stroke: "#d1d9e0" }));
      var iso = new Date(t).toISOString();
      var anchor = k === 0 ? "start" : k === 4 ? "end" : "middle";
      root.appendChild(svg("text", { x: x, y: 11, "font-size": 10, fill: "#59636e", "text-anchor": anchor },
        t1 - t0 > 2 * 86400000 ? iso.slice(0, 10) : when(iso.slice(0, 19) + "Z")));
    }
    runs.forEach(function (x) {
      var r = x.r, bx = left + (x.start - t0) * scale, bw = Math.max(3, (x.end - x.start) * scale), by = 20 + x.lane * laneH;
      var group = svg("g", { "data-run": r.run_id });
      group.appendChild(svg("title", {}, r.run_id + " (" + r.kind + ") " + r.status + "\n" + r.models.join(", ") + " " + r.partitions +
        "\n" + runLine(r) + (r.throughput ? ", " + r.throughput : "") + ", took " + duration(r.seconds) +
        (runReason(r) ? "\n" + runReason(r) : "")));
      group.appendChild(svg("rect", { x: bx, y: by, width: bw, height: laneH - 6, rx: 2, fill: statusColour(r.status) }));
      if (r.kind === "backfill" && bw > 90) {
        group.appendChild(svg("text", { x: bx + 4, y: by + 11, "font-size": 10, fill: "#ffffff" },
          (r.attempts.published || 0) + " published" + (r.throughput ? " · " + r.throughput.replace(" partitions", "") : "")));
      }
      if (r.trigger) {
        var ex = bx + bw;
        group.appendChild(svg("path", { d: "M" + ex + " " + (by - 3) + " l6 10 l-6 10 l-6 -10 z", fill: "#1f2328", stroke: "#ffffff", "data-stop-loss": r.trigger }));
      }
      root.appendChild(group);
    });
    holder.appendChild(root);
  }

  function renderHistory() {
    var versions = view.versions.slice().sort(function (a, b) { return a.model < b.model ? -1 : a.model > b.model ? 1 : b.seq - a.seq; });
    table($("version-table"), ["model", "version", "id", "change", "built", "git commit", "checks", ""],
      versions.map(function (v) {
        return [v.model, "v" + v.seq, { text: v.id, cls: "mono" }, v.change, when(v.created_at),
          { text: (v.git_commit ? v.git_commit.slice(0, 12) : "no commit") + (v.git_dirty ? " (dirty)" : ""), cls: "mono" },
          v.checks.join(", "), v.active ? "active" : ""];
      }), "no versions built");
    table($("event-table"), ["at", "model", "event", "version", "by", "reason", "run", "detail"],
      view.events.map(function (e) {
        return [when(e.at), e.model || "", e.kind, e.version >= 0 ? "v" + view.versions[e.version].seq : "", e.actor,
          { text: e.reason || "", cls: "wrap" }, { text: e.run_id || "", cls: "mono" }, { text: e.detail, cls: "wrap mono" }];
      }), "no history yet");
  }

  function renderChecks() {
    table($("check-table"), ["at", "model", "partition", "check", "severity", "message", "run", "resolved"],
      view.failing_checks.map(function (c) {
        var fixed = c.resolved_by !== null;
        var row = [when(c.at), c.model, c.partition, c.name,
          { text: c.severity, cls: fixed ? "" : c.severity === "blocking" ? "fail" : "warn" },
          { text: c.message, cls: "wrap" }, { text: c.run_id, cls: "mono" },
          fixed ? "resolved by run " + c.resolved_by + " at " + when(c.resolved_at) : "open"];
        row.cls = fixed ? "resolved" : null;
        return row;
      }), "no failing checks");
  }

  function renderTaints() {
    table($("taint-table"), ["model", "partitions", "reason", "declared on", "depth", "count", "marked at", "taint"],
      view.taints.map(function (t) {
        return [t.model, { text: t.ranges.join(", "), cls: "wrap" }, { text: t.reason, cls: "wrap" }, t.origin,
          t.depth, { text: String(t.partitions), cls: "num" }, when(t.marked_at), { text: t.taint_id, cls: "mono" }];
      }), "no open taints");
  }

  function renderNotices() {
    table($("notice-table"), ["queued", "target", "consumers", "what", "model", "partitions", "run", "delivered"],
      view.notices.map(function (n) {
        var parts = n.partitions.join(", ") + (n.more_partitions ? " … and " + n.more_partitions + " more" : "");
        var delivered = n.delivered_at ? when(n.delivered_at) :
          "pending after " + n.attempts + " attempt(s)" + (n.last_error ? ": " + n.last_error : "") + "; next " + when(n.next_attempt_at);
        return [when(n.created_at), n.target, n.consumers.join(", "), n.what + (n.reason ? " (" + n.reason + ")" : ""), n.model || "",
          { text: parts, cls: "wrap" }, { text: n.run_id || "", cls: "mono" }, { text: delivered, cls: n.delivered_at ? "" : "warn" }];
      }), "nothing sent to consumers or lineage targets");
  }

  function renderMeta() {
    $("title").textContent = "tidegate — " + view.project;
    var meta = $("meta");
    clear(meta);
    meta.appendChild(document.createTextNode("as of " + when(view.as_of) + " · " + view.models.length + " models · " + view.runs.length + " recent runs "));
    if (boot.live) {
      meta.appendChild(el("span", "live", offline ? "live: server unreachable" : "live"));
      meta.appendChild(document.createTextNode(" updated " + when(updatedAt.toISOString().slice(0, 19) + "Z")));
    }
  }

  function renderAll() {
    renderMeta();
    renderModels();
    renderRuns();
    renderHistory();
    renderChecks();
    renderTaints();
    renderNotices();
    document.body.setAttribute("data-etag", etag || "");
  }

  // ---- live refresh ----------------------------------------------------------------------
  function poll() {
    var headers = etag ? { "If-None-Match": etag } : {};
    fetch("api/view", { headers: headers, cache: "no-store" }).then(function (r) {
      if (r.status !== 200) { return null; }
      etag = r.headers.get("ETag");
      return r.json();
    }).then(function (fresh) {
      offline = false;
      updatedAt = new Date();
      if (fresh) { view = fresh; renderAll(); } else { renderMeta(); }
    }).catch(function () {
      offline = true;
      renderMeta();
    }).then(function () { setTimeout(poll, boot.refresh_ms); });
  }

  // ---- start -----------------------------------------------------------------------------
  var styles = getComputedStyle(document.documentElement);
  view.states.forEach(function (s) { colours[s] = styles.getPropertyValue("--" + s).trim(); });
  $("detail-close").addEventListener("click", function () {
    $("detail").hidden = true;
    selected = null;
    drawn.forEach(drawModel);
  });
  var resizing = false;
  window.addEventListener("resize", function () {
    if (resizing) { return; }
    resizing = true;
    requestAnimationFrame(function () { resizing = false; renderModels(); drawTimeline(); });
  });
  renderAll();
  window.tidegate = {
    renderMs: performance.now() - started,
    sinceNavigationMs: performance.now(),
    cells: function () { return view.models.reduce(function (n, m) { return n + m.n; }, 0); },
    counts: function (name) {
      var m = view.models.filter(function (x) { return x.name === name; })[0];
      return m ? m.counts : null;
    },
    cellBox: function (name, text) {
      var d = drawn.filter(function (x) { return x.m.name === name; })[0];
      var i = d ? ordinalOf(d.m, text) : -1;
      if (i < 0) { return null; }
      var rect = d.canvas.getBoundingClientRect();
      return {
        x: rect.left + d.L.left + d.L.col(i) * d.g.pitch + d.g.size / 2,
        y: rect.top + d.L.top + d.L.row(i) * d.g.pitch + d.g.size / 2
      };
    }
  };
  document.body.setAttribute("data-ready", "1");
  if (boot.live) { setTimeout(poll, boot.refresh_ms); }
}());
