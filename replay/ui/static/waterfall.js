/* The run page's waterfall: one row per span in tree order (indented name, a bar on a shared
   time axis, duration, tokens, cost), the start-up before the first call left out of the axis,
   an overview with one lane per agent that zooms the axis to a dragged range. One tab stop
   (the selected row: a roving tabindex); the page's keys move the selection. */
"use strict";
(function (R) {
  var el = R.el;
  var FIRST_ROWS = 120, BATCH_ROWS = 400;

  function label(e) {
    return (e.step !== null ? "#" + e.step + " " : "") + (e.label || e.name);
  }
  R.stepLabel = label;

  /* Rows in tree order with their depth: a flat list stays fast at thousands of spans. */
  function treeOrder(events) {
    var children = {}, roots = [], known = {};
    events.forEach(function (e) { known[e.index] = true; });
    events.forEach(function (e) {
      if (e.parent === null || e.parent === undefined || !known[e.parent]) roots.push(e);
      else (children[e.parent] = children[e.parent] || []).push(e);
    });
    var rows = [], stack = roots.slice().reverse().map(function (e) { return [e, 0]; });
    while (stack.length) {
      var top = stack.pop(), kids = children[top[0].index] || [];
      rows.push(top);
      for (var i = kids.length - 1; i >= 0; i--) stack.push([kids[i], top[1] + 1]);
    }
    return {rows: rows, children: children};
  }
  R.treeOrder = treeOrder;

  /* Where the axis starts: at the first call when the root spans begin long before it (the
     interpreter starting, imports), so the steps are not squeezed into the right tenth. */
  function axis(events) {
    var start = Infinity, end = 0, firstInner = Infinity;
    events.forEach(function (e) {
      start = Math.min(start, e.start_ms);
      end = Math.max(end, e.start_ms + e.duration_ms);
      if (e.parent !== null && e.parent !== undefined) firstInner = Math.min(firstInner, e.start_ms);
    });
    var skipped = firstInner < Infinity && firstInner - start > 0.05 * (end - start) ? firstInner - start : 0;
    return {origin: start + skipped, end: end, skipped: skipped};
  }

  /* About five round tick marks over [from, to] ms. */
  function ticks(from, to) {
    var span = Math.max(to - from, 1e-3), raw = span / 5, power = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 5, 10].map(function (m) { return m * power; }).find(function (s) { return s >= raw; });
    var marks = [];
    for (var t = Math.ceil(from / step) * step; t <= to + 1e-9; t += step) marks.push(t);
    return marks;
  }

  function place(node, from, width) {
    node.style.left = from.toFixed(3) + "%";
    node.style.width = Math.max(0.25, width).toFixed(3) + "%";
  }

  R.waterfall = function (run, onPick) {
    var order = treeOrder(run.events), frame = axis(run.events);
    var view = {from: 0, to: Math.max(frame.end - frame.origin, 1e-3)};
    var bars = [], rowsByIndex = {}, full = view.to, current = null;

    function pos(e) {
      var width = view.to - view.from, at = e.start_ms - frame.origin;
      var left = 100 * (at - view.from) / width, size = 100 * e.duration_ms / width;
      var clippedLeft = left < 0;
      if (clippedLeft) { size += left; left = 0; }
      return {left: left, width: Math.min(size, 100 - left), clipped: clippedLeft, out: left > 100 || size <= 0};
    }

    function drawBar(pair) {
      var p = pos(pair[1]);
      pair[0].hidden = p.out;
      pair[0].classList.toggle("clipped", p.clipped);
      if (!p.out) place(pair[0], p.left, p.width);
    }

    function drawBars() {
      bars.forEach(drawBar);
      R.clear(scale);
      ticks(view.from, view.to).forEach(function (t) {
        var left = 100 * (t - view.from) / (view.to - view.from);
        scale.appendChild(el("span", {class: "tick" + (left < 8 ? " start" : left > 92 ? " end" : ""),
          style: {left: left.toFixed(3) + "%"}}, t === 0 ? "0" : R.ms(t)));
      });
      reset.hidden = view.from === 0 && view.to === full;
      zoomed.textContent = reset.hidden ? "" : R.ms(view.from) + " – " + R.ms(view.to);
    }

    function row(pair) {
      var e = pair[0], depth = pair[1];
      var bar = el("span", {class: "bar type-" + e.kind + (e.status === "ok" ? "" : " failed")});
      bars.push([bar, e]);
      drawBar([bar, e]);
      var llm = e.type === "llm";
      var node = el("button", {type: "button", tabindex: -1, role: "treeitem", "aria-level": depth + 1,
        class: "event wf-row type-" + e.kind + (e.status === "ok" ? "" : " failed"), "data-index": e.index,
        title: label(e) + " · " + R.ms(e.duration_ms)},
        el("span", {class: "wf-name", style: {paddingLeft: (0.2 + 0.8 * Math.min(depth, 12)) + "em"}},
          el("span", {class: "kind"}, e.kind), " ",
          e.code ? el("span", {class: "badge code" + (e.code >= 400 ? " error" : "")}, String(e.code)) : null,
          e.status === "ok" || e.code ? null : el("span", {class: "badge error"}, e.status),
          el("span", {class: "label"}, label(e))),
        el("span", {class: "wf-track"}, bar),
        el("span", {class: "num wf-dur"}, R.ms(e.duration_ms)),
        el("span", {class: "num wf-tok"}, llm ? R.num(e.input_tokens + e.output_tokens) : ""),
        el("span", {class: "num wf-cost"}, llm ? R.shortCost(e.cost_usd) : ""));
      rowsByIndex[e.index] = node;
      if (e.index === current) {  /* selected before its row was drawn */
        node.classList.add("selected");
        node.tabIndex = 0;
        setTimeout(function () { node.scrollIntoView({block: "nearest"}); }, 0);
      }
      return node;
    }

    /* One lane per agent (the overview and the zoom brush): drag across it to zoom. */
    function overview() {
      var byLane = {}, names = [];
      run.events.forEach(function (e) {
        if (!byLane[e.lane]) { byLane[e.lane] = []; names.push(e.lane); }
        byLane[e.lane].push(e);
      });
      var brush = el("div", {class: "brush", hidden: true});
      var box = el("div", {class: "lanes" + (names.length > 1 ? " several" : ""), id: "lanes",
        title: "Drag across the lanes to zoom the waterfall"}, names.map(function (lane) {
        return el("div", {class: "lane"}, el("div", {class: "lane-name"}, names.length > 1 ? lane : "time"),
          el("div", {class: "track"}, byLane[lane].map(function (e) {
            var left = 100 * Math.max(0, e.start_ms - frame.origin) / full;
            var width = 100 * (e.start_ms + e.duration_ms - Math.max(e.start_ms, frame.origin)) / full;
            var node = el("span", {class: "bar type-" + e.kind, "data-index": e.index});
            place(node, left, width);
            return node;
          })));
      }), brush);
      var down = null;
      function at(event) {
        var track = box.querySelector(".track").getBoundingClientRect();
        return Math.min(1, Math.max(0, (event.clientX - track.left) / track.width));
      }
      box.addEventListener("pointerdown", function (event) { down = at(event); brush.hidden = true; });
      box.addEventListener("pointermove", function (event) {
        if (down === null) return;
        var now = at(event), track = box.querySelector(".track"), lo = Math.min(down, now), hi = Math.max(down, now);
        brush.hidden = false;
        brush.style.left = (track.offsetLeft + lo * track.offsetWidth) + "px";
        brush.style.width = ((hi - lo) * track.offsetWidth) + "px";
      });
      box.addEventListener("pointerup", function (event) {
        if (down === null) return;
        var now = at(event), lo = Math.min(down, now), hi = Math.max(down, now);
        down = null;
        brush.hidden = true;
        if (hi - lo > 0.005) zoom(lo * full, hi * full);
        else {
          var hit = event.target.closest("[data-index]");
          if (hit) onPick(Number(hit.dataset.index));
        }
      });
      return box;
    }

    function zoom(from, to) {
      view.from = Math.max(0, from);
      view.to = Math.min(full, Math.max(to, view.from + 1e-3));
      drawBars();
    }

    var scale = el("div", {class: "wf-scale", id: "axis"});
    var zoomed = el("span", {class: "muted", id: "zoom-range"});
    var reset = el("button", {type: "button", id: "zoom-reset", hidden: true, onclick: function () { zoom(0, full); }}, "Reset zoom");
    var tree = el("div", {class: "tree wf-rows", id: "tree", role: "tree", "aria-label": "Spans",
      onclick: function (event) {
        var target = event.target.closest("[data-index]");
        if (target) onPick(Number(target.dataset.index));
      }}, order.rows.slice(0, FIRST_ROWS).map(row));
    /* The first screen's rows at once, the rest a batch per task: a long run opens fast. */
    (function more(from) {
      if (from >= order.rows.length) return;
      setTimeout(function () {
        R.append(tree, order.rows.slice(from, from + BATCH_ROWS).map(row));
        more(from + BATCH_ROWS);
      }, 0);
    })(FIRST_ROWS);
    var first = tree.firstChild;
    if (first) first.tabIndex = 0;
    var node = el("div", {class: "waterfall", id: "waterfall"},
      el("div", {class: "wf-tools"}, frame.skipped ? el("span", {class: "muted", id: "startup"},
        "Start-up before the first call (" + R.ms(frame.skipped) + ") left out of the axis. ") : null, zoomed, " ", reset),
      overview(),
      el("div", {class: "wf-row wf-head"}, el("span", {class: "wf-name"}, "Span"), el("span", {class: "wf-track"}, scale),
        el("span", {class: "num wf-dur"}, "Time"), el("span", {class: "num wf-tok"}, "Tokens"), el("span", {class: "num wf-cost"}, "Cost")),
      tree);
    drawBars();
    return {
      node: node, tree: tree, children: order.children, rows: order.rows.map(function (p) { return p[0]; }),
      origin: frame.origin, zoom: zoom,
      /* The selected row is the tree's one tab stop. */
      focusable: function (index, focus) {
        var before = tree.querySelector('[tabindex="0"]');
        if (before) before.tabIndex = -1;
        current = index;
        var target = rowsByIndex[index];
        if (!target) return;
        target.tabIndex = 0;
        if (focus) target.focus({preventScroll: true});
        target.scrollIntoView({block: "nearest"});
      }
    };
  };
})(Rewind);
