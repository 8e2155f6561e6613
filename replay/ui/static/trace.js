/* The run page: span tree, timeline lanes, the selected step in full, replay and fork lines. */
"use strict";
(function (R) {
  var el = R.el;
  var LIVE_EVERY_MS = 1500;
  var run, selected = null, detailBox, forkBox, headBox, outlineBox, liveNote, fall;

  /* A step's detail: from the data the page came with (a shared file has every step), else
     asked for when it is selected. */
  function stepDetail(index) {
    var known = R.data && R.data.steps ? R.data.steps[index] : null;
    if (known || R.shared) return Promise.resolve(known);
    return R.get("/v1/ui/traces/" + run.trace_id + "/step?index=" + index);
  }

  function label(e) { return R.stepLabel(e); }

  function showDetail(d) {
    R.append(R.clear(detailBox), R.stepView(d, {
      children: function (index) { return (fall.children[index] || []); },
      select: function (index) { select(index, true); },
      served: served
    }));
    showFork(d);
  }

  function field(name, title, input) {
    return el("label", {class: "field"}, el("span", {}, title), input);
  }

  function showFork(d) {
    R.clear(forkBox);
    /* A model's or a tool's answer can be edited; other steps replay as recorded. */
    if (d.step === null || R.shared || (d.kind !== "llm" && d.kind !== "tool")) return;
    var original = d.type === "tool" ? R.json(d.output && d.output[0] ? d.output[0].parts[0].response : "") : (d.last_user_message || "");
    var edit = el("textarea", {name: "edit", id: "fork-edit", rows: 4}, original);
    var model = el("input", {name: "model", id: "fork-model", placeholder: d.model || "same model"});
    /* A model step's system prompt, for it and every model call after it. */
    var systemOriginal = d.type === "tool" ? "" : (d.system_message || "");
    var system = el("textarea", {name: "system", id: "fork-system", rows: 3}, systemOriginal);
    /* What the model should have answered at this step: the steps after it go live. */
    var answer = el("textarea", {name: "answer", id: "fork-answer", rows: 3, placeholder: "the recorded answer"});
    var params = el("textarea", {name: "params", id: "fork-params", rows: 2, placeholder: "temperature=0.2"});
    /* Left for the user to type: a recorded string is never made a command for them. */
    var command = el("input", {name: "command", id: "fork-run", placeholder: "python agent.py"});
    var line = el("code", {id: "fork-command"});
    function update() {
      var words = ["rewind", "fork", run.trace_id, "--step", String(d.step)];
      if (edit.value !== original) words.push(d.type === "tool" ? "--tool-result" : "--user-message", edit.value);
      if (system.value !== systemOriginal) words.push("--system-message", system.value);
      if (answer.value.trim()) words.push("--answer", answer.value);
      if (model.value.trim()) words.push("--model", model.value.trim());
      params.value.split("\n").forEach(function (p) { if (p.trim()) words.push("--param", p.trim()); });
      line.textContent = words.map(R.quote).join(" ") + " -- " + (command.value.trim() || command.placeholder);
    }
    [edit, system, answer, model, params, command].forEach(function (input) { input.addEventListener("input", update); });
    R.prefillFork(d.step, {edit: edit, system: system, model: model, params: params});
    update();
    R.append(forkBox, [el("h3", {}, "Fork at step " + d.step),
      el("form", {class: "fork", id: "fork-form", onsubmit: function (e) { e.preventDefault(); }},
        field("edit", d.type === "tool" ? "Tool result (JSON)" : "Last user message", edit),
        d.type === "tool" ? null : field("system", "System prompt (this call and after)", system),
        d.type === "tool" ? null : field("answer", "The model's answer instead", answer),
        field("model", "Model", model), field("params", "Parameters (KEY=VALUE per line)", params),
        field("command", "Your agent's command", command)),
      el("div", {class: "command"}, line, R.copyButton(function () { return line.textContent; }))]);
  }

  function select(index, focus) {
    selected = index;
    document.querySelectorAll(".selected").forEach(function (n) { n.classList.remove("selected"); });
    document.querySelectorAll('[data-index="' + index + '"]').forEach(function (n) { n.classList.add("selected"); });
    fall.focusable(index, focus);
    history.replaceState(null, "", "#event-" + index);
    R.clear(detailBox).appendChild(el("p", {class: "muted"}, "Loading…"));
    stepDetail(index).then(function (d) { if (selected === index) showDetail(d); }, function (error) {
      R.clear(detailBox).appendChild(el("p", {class: "error"}, String(error.message || error)));
    });
  }

  /* In the tree, every row in tree order; elsewhere (j / k), the recorded steps. */
  function move(delta, inTree) {
    var stepped = run.events.filter(function (e) { return e.step !== null; });
    var list = inTree || !stepped.length ? fall.rows : stepped;
    var at = list.findIndex(function (e) { return e.index === selected; });
    var to = delta === Infinity ? list.length - 1 : delta === -Infinity ? 0 : Math.min(list.length - 1, Math.max(0, at < 0 ? 0 : at + delta));
    if (list[to]) select(list[to].index, inTree);
  }

  function keys(event) {
    var tag = (event.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "textarea" || tag === "select" || event.ctrlKey || event.metaKey || event.altKey) return;
    var inTree = Boolean(event.target.closest && event.target.closest("#tree"));
    if (event.key === "z" || event.key === "Escape") {
      var e = run.events[selected];
      if (event.key === "z" && e) fall.zoom(e.start_ms - fall.origin, e.start_ms + e.duration_ms - fall.origin);
      else fall.zoom(0, Infinity);
      return;
    }
    var delta = {j: 1, k: -1, ArrowDown: 1, ArrowUp: -1, Home: -Infinity, End: Infinity}[event.key];
    if (delta === undefined || ((event.key === "Home" || event.key === "End") && !inTree && tag !== "body")) return;
    move(delta, inTree);
    event.preventDefault();
  }

  /* #step-N (a recorded step) or #event-N (any span) in the address selects it. */
  function fromHash() {
    var match = /^#(event|step)-(\d+)$/.exec(location.hash);
    if (!match) return null;
    return run.events.find(function (e) {
      return match[1] === "event" ? e.index === Number(match[2]) : e.step === Number(match[2]);
    }) || null;
  }

  function header() {
    var t = run.totals;
    var facts = R.num(t.llm_calls) + " LLM calls · " + R.num(t.tool_calls) + " tool calls · tokens " +
      R.num(t.input_tokens) + " in / " + R.num(t.output_tokens) + " out · " + R.cost(t.cost_usd) +
      (t.unreported_calls ? " (+" + t.unreported_calls + " calls usage not reported)" : "") + " · " + R.ms(t.duration_ms) + " · " + R.num(t.errors) + " errors";
    var origin = null;
    var source = run.lineage ? run.lineage.source_trace_id : run.replayed_from;
    if (run.lineage) origin = el("p", {id: "lineage"}, "Forked from ", R.traceLink(source), " at step " + run.lineage.step,
      run.lineage.edits ? el("span", {class: "muted"}, " with " + JSON.stringify(run.lineage.edits)) : null);
    else if (source) origin = el("p", {id: "lineage"}, "Replay of ", R.traceLink(source));
    if (origin) R.append(origin, [" · ", compareLinks(source, run.trace_id)]);
    return [el("h1", {}, "Run ", el("span", {class: "id", id: "trace-id"}, run.trace_id)),
      el("p", {class: "muted"}, run.service + " · " + facts), origin, served(run.inbound)].concat(replayLine(run.replay));
  }

  /* The line that replays the run, or why the recorded command is not offered. */
  function replayLine(replay) {
    var keys = " (j / k walk the steps; in the waterfall ↓ / ↑, Home / End; z zooms to the step, Esc zooms out)";
    if (replay.line === null) return [el("p", {class: "hint", id: "replay-refused"}, replay.refused + keys)];
    return [el("p", {class: "hint", id: "replay-label"}, replay.label + keys + ":"), R.command("replay-command", replay.line)];
  }

  /* What the service was asked and answered (a job: called with, returned or raised). */
  function served(x) {
    if (!x) return null;
    var bad = x.failed ? "error" : "";
    var box = function (id, title, text) { return text ? [el("h4", {}, title), R.pre(text, {id: id})] : null; };
    if (x.kind === "job") {
      return el("section", {class: "inbound", id: "inbound"},
        el("h3", {}, "Job ", el("code", {id: "inbound-target"}, x.app || "?"), " ",
          el("span", {class: "badge " + bad, id: "inbound-status"}, x.failed ? "raised" : "returned")),
        box("inbound-arguments", "Arguments", x.arguments),
        x.error ? box("inbound-error", "Error", x.error) : box("inbound-result", "Result", x.result));
    }
    var target = x.method + " " + (x.path || x.route) + (x.query ? "?" + x.query : "");
    return el("section", {class: "inbound", id: "inbound"},
      el("h3", {}, "Request ", el("code", {id: "inbound-target"}, target), " ",
        el("span", {class: "badge " + bad, id: "inbound-status"}, String(x.status || "no status")),
        x.route && x.route !== x.path ? el("span", {class: "muted", id: "inbound-route"}, " route " + x.route) : null),
      box("inbound-request", "Request body", x.request_body),
      box("inbound-response", "Response body", x.response_body),
      x.events && x.events.length ? [el("h4", {}, "Response events"), el("ol", {id: "inbound-events"},
        x.events.map(function (e) { return el("li", {}, el("span", {class: "muted"}, "+" + R.ms(e.offset_ms) + " "), R.pre(e.data)); }))] : null);
  }

  function compareLinks(left, right) {
    var pair = encodeURIComponent(left) + "/" + encodeURIComponent(right);
    return [R.link("/diff/" + pair, "diff"), " · ", R.link("/bisect/" + pair, "bisect")];
  }

  function derived() {
    if (R.shared) return null;
    var list = run.derived.length ? el("ul", {id: "forks"}, run.derived.map(function (d) {
      return el("li", {}, el("span", {class: "badge " + d.Kind}, d.Kind), " ", R.traceLink(d.TraceId, d.TraceId),
        d.Step ? " at step " + d.Step : "", " · ", R.time(d.Start), " · ", compareLinks(run.trace_id, d.TraceId),
        d.Edits ? el("div", {class: "muted"}, d.Edits) : null);
    })) : el("p", {class: "muted", id: "forks"}, "No forks or replays of this run yet.");
    return R.section("Forks and replays of this run", list);
  }

  function drawOutline() {
    fall = R.waterfall(run, function (index) { select(index, true); });
    R.clear(outlineBox).appendChild(R.section("Waterfall", fall.node));
  }

  /* A run still being recorded: its outline asked for again until it is finished. */
  function poll() {
    if (!run.live || R.shared) return;
    setTimeout(function () {
      R.get("/v1/ui/traces/" + run.trace_id).then(function (fresh) {
        var grown = fresh.events.length !== run.events.length;
        run = fresh;
        if (grown) {
          R.clear(headBox);
          R.append(headBox, header());
          drawOutline();
          if (selected !== null) select(selected);
        }
        liveNote.hidden = !run.live;
        poll();
      }, function () { poll(); });
    }, LIVE_EVERY_MS);
  }

  function render(data) {
    run = data;
    R.where("Run " + run.trace_id.slice(0, 12));
    detailBox = el("div", {class: "detail", id: "detail", tabindex: 0, role: "region", "aria-label": "Selected step"},
      el("p", {class: "muted"}, "Select a step."));
    forkBox = el("div", {class: "fork-box", id: "fork"});
    headBox = el("div", {id: "run-head"}, header());
    outlineBox = el("div", {class: "outline"});
    liveNote = el("p", {class: "live", id: "live", hidden: !run.live}, "Still recording: new steps appear as they are stored.");
    R.mount(headBox, liveNote, el("div", {class: "split"}, outlineBox,
      el("div", {class: "side"}, detailBox, forkBox, derived())));
    drawOutline();
    document.addEventListener("keydown", keys);
    window.addEventListener("hashchange", function () {
      var wanted = fromHash();
      if (wanted) select(wanted.index);
    });
    var wanted = fromHash() || run.events.find(function (e) { return e.step !== null; }) || run.events[0];
    if (wanted) select(wanted.index);
    poll();
  }

  R.pages.trace = function (ids) {
    if (R.data && R.data.trace) { render(R.data.trace); return; }
    R.get("/v1/ui/traces/" + ids[0]).then(render, R.fail);
  };
})(Rewind);
