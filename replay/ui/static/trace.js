/* The run page: span tree, timeline lanes, the selected step in full, replay and fork lines. */
"use strict";
(function (R) {
  var el = R.el;
  var run, selected = null, detailBox, forkBox;

  /* A step's detail: from the data the page came with (a shared file has every step), else
     asked for when it is selected. */
  function stepDetail(index) {
    var known = R.data && R.data.steps ? R.data.steps[index] : null;
    if (known || R.shared) return Promise.resolve(known);
    return R.get("/v1/ui/traces/" + run.trace_id + "/step?index=" + index);
  }

  function onPick(event) {
    var target = event.target.closest("[data-index]");
    if (target) select(Number(target.dataset.index));
  }

  function label(e) {
    return (e.step !== null ? "#" + e.step + " " : "") + e.name;
  }

  function eventButton(e, depth) {
    return el("button", {type: "button", class: "event type-" + e.type + (e.status === "ok" ? "" : " failed"),
      "data-index": e.index, style: {paddingLeft: (0.3 + depth) + "em"}},
      el("span", {class: "label"}, label(e)),
      e.status === "ok" ? null : el("span", {class: "badge error"}, e.status),
      e.preview ? el("span", {class: "preview"}, e.preview) : null);
  }

  function tree() {
    var children = {}, roots = [];
    run.events.forEach(function (e) {
      if (e.parent === null || e.parent === undefined) roots.push(e);
      else (children[e.parent] = children[e.parent] || []).push(e);
    });
    /* One row per span in tree order, indented by depth: a flat list stays fast at
       thousands of spans (rows out of view are not laid out). */
    var rows = [], stack = roots.slice().reverse().map(function (e) { return [e, 0]; });
    while (stack.length) {
      var top = stack.pop(), kids = children[top[0].index] || [];
      rows.push(eventButton(top[0], top[1]));
      for (var i = kids.length - 1; i >= 0; i--) stack.push([kids[i], top[1] + 1]);
    }
    return el("div", {class: "tree", id: "tree", onclick: onPick}, rows);
  }

  function lanes() {
    var end = Math.max.apply(null, run.events.map(function (e) { return e.start_ms + e.duration_ms; })) || 1;
    var byLane = {}, order = [];
    run.events.forEach(function (e) {
      if (!byLane[e.lane]) { byLane[e.lane] = []; order.push(e.lane); }
      byLane[e.lane].push(e);
    });
    return el("div", {class: "lanes", id: "lanes", onclick: onPick}, order.map(function (lane) {
      return el("div", {class: "lane"}, el("div", {class: "lane-name"}, lane),
        el("div", {class: "track"}, byLane[lane].map(function (e) {
          var left = 100 * e.start_ms / end, width = Math.max(0.3, 100 * e.duration_ms / end);
          return el("button", {type: "button", class: "bar type-" + e.type, "data-index": e.index,
            style: {left: left.toFixed(3) + "%", width: width.toFixed(3) + "%"},
            title: label(e) + " · " + R.ms(e.duration_ms)});
        })));
    }));
  }

  function part(p) {
    if (p.type === "text") return el("div", {class: "text"}, p.content);
    if (p.type === "tool_call") return el("div", {class: "call"}, el("b", {}, "call " + p.name), R.pre(R.json(p.arguments)));
    if (p.type === "tool_call_response") return el("div", {class: "result"}, el("b", {}, "result"), R.pre(R.json(p.response)));
    if (p.type === "reasoning") return el("div", {class: "reasoning"}, el("b", {}, "reasoning"), el("div", {class: "text"}, p.content));
    return R.pre(R.json(p));
  }

  function messages(list, id) {
    if (!list || !list.length) return el("p", {class: "muted"}, "Nothing recorded.");
    return el("div", {class: "messages", id: id}, list.map(function (m) {
      return el("div", {class: "message role-" + m.role}, el("div", {class: "role"}, m.role),
        (m.parts || []).map(part));
    }));
  }

  function numbers(d) {
    var rows = [["Type", d.type], ["Span", d.name], ["Status", d.status], ["Latency", R.ms(d.duration_ms)]];
    if (d.type === "llm" && d.usage_reported === false) rows.push(["Model", d.model], ["Tokens in / out", "not reported"], ["Cost", "not reported"]);
    else if (d.type === "llm") rows.push(["Model", d.model], ["Tokens in / out", R.num(d.input_tokens) + " / " + R.num(d.output_tokens)], ["Cost", R.cost(d.cost_usd)]);
    if (d.tool_name) rows.push(["Tool", d.tool_name]);
    return el("dl", {class: "numbers"}, rows.map(function (r) { return [el("dt", {}, r[0]), el("dd", {}, r[1])]; }));
  }

  function exchange(x) {
    if (!x) return null;
    var parts = [el("p", {}, x.method + " " + x.url + " → " + x.status + (x.synthetic ? " (rebuilt from content)" : "")),
      el("h4", {}, "Request"), R.pre(x.request, {class: "raw", id: "raw-request"})];
    if (x.streamed) {
      parts.push(el("h4", {}, "Stream (" + x.events.length + " events)"), el("table", {class: "stream", id: "stream"},
        el("tbody", {}, x.events.map(function (ev) {
          return el("tr", {}, el("td", {class: "num"}, "+" + ev.offset_ms + " ms"), el("td", {}, R.pre(ev.data)));
        }))));
    } else parts.push(el("h4", {}, "Response"), R.pre(x.response, {class: "raw", id: "raw-response"}));
    return R.folded("Raw exchange", parts);
  }

  function showDetail(d) {
    var box = R.clear(detailBox);
    R.append(box, [el("h2", {}, label(d)), numbers(d)]);
    if (d.error) box.appendChild(el("p", {class: "error", id: "step-error"}, d.error));
    if (!d.content) {
      box.appendChild(el("p", {class: "muted"}, "Shared without content: messages and bodies left out."));
    } else if (d.type === "tool") {
      R.append(box, [R.section("Arguments", R.pre(R.json(d.arguments), {id: "tool-arguments"})),
        R.section("Result", messages(d.output, "answer"))]);
    } else {
      R.append(box, [R.section("Context the model saw", messages(d.input, "context")),
        d.tools && d.tools.length ? R.folded("Tools offered (" + d.tools.length + ")", R.pre(R.json(d.tools))) : null,
        d.params && Object.keys(d.params).length ? R.section("Parameters", R.pre(R.json(d.params))) : null,
        R.section("Answer", messages(d.output, "answer"))]);
    }
    if (d.content) R.append(box, exchange(d.exchange));
    R.append(box, R.folded("Span attributes", R.pre(R.json(d.attributes))));
    showFork(d);
  }

  function field(name, title, input) {
    return el("label", {class: "field"}, el("span", {}, title), input);
  }

  function showFork(d) {
    R.clear(forkBox);
    if (d.step === null || R.shared) return;
    var original = d.type === "tool" ? R.json(d.output && d.output[0] ? d.output[0].parts[0].response : "") : (d.last_user_message || "");
    var edit = el("textarea", {name: "edit", id: "fork-edit", rows: 4}, original);
    var model = el("input", {name: "model", id: "fork-model", placeholder: d.model || "same model"});
    var params = el("textarea", {name: "params", id: "fork-params", rows: 2, placeholder: "temperature=0.2"});
    /* Left for the user to type: a recorded string is never made a command for them. */
    var command = el("input", {name: "command", id: "fork-run", placeholder: "python agent.py"});
    var line = el("code", {id: "fork-command"});
    function update() {
      var words = ["rewind", "fork", run.trace_id, "--step", String(d.step)];
      if (edit.value !== original) words.push(d.type === "tool" ? "--tool-result" : "--user-message", edit.value);
      if (model.value.trim()) words.push("--model", model.value.trim());
      params.value.split("\n").forEach(function (p) { if (p.trim()) words.push("--param", p.trim()); });
      line.textContent = words.map(R.quote).join(" ") + " -- " + (command.value.trim() || command.placeholder);
    }
    [edit, model, params, command].forEach(function (input) { input.addEventListener("input", update); });
    R.prefillFork(d.step, {edit: edit, model: model, params: params});
    update();
    R.append(forkBox, [el("h3", {}, "Fork at step " + d.step),
      el("form", {class: "fork", id: "fork-form", onsubmit: function (e) { e.preventDefault(); }},
        field("edit", d.type === "tool" ? "Tool result (JSON)" : "Last user message", edit),
        field("model", "Model", model), field("params", "Parameters (KEY=VALUE per line)", params),
        field("command", "Your agent's command", command)),
      el("div", {class: "command"}, line, R.copyButton(function () { return line.textContent; }))]);
  }

  function select(index) {
    selected = index;
    document.querySelectorAll(".selected").forEach(function (n) { n.classList.remove("selected"); });
    document.querySelectorAll('[data-index="' + index + '"]').forEach(function (n) { n.classList.add("selected"); });
    var row = document.querySelector('.tree [data-index="' + index + '"]');
    if (row) row.scrollIntoView({block: "nearest"});
    history.replaceState(null, "", "#event-" + index);
    R.clear(detailBox).appendChild(el("p", {class: "muted"}, "Loading…"));
    stepDetail(index).then(function (d) { if (selected === index) showDetail(d); }, function (error) {
      R.clear(detailBox).appendChild(el("p", {class: "error"}, String(error.message || error)));
    });
  }

  function move(delta) {
    var stepped = run.events.filter(function (e) { return e.step !== null; });
    var list = stepped.length ? stepped : run.events;
    var at = list.findIndex(function (e) { return e.index === selected; });
    var next = list[Math.min(list.length - 1, Math.max(0, at < 0 ? 0 : at + delta))];
    if (next) select(next.index);
  }

  function keys(event) {
    var tag = (event.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "textarea" || tag === "select" || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "j" || event.key === "ArrowDown") { move(1); event.preventDefault(); }
    if (event.key === "k" || event.key === "ArrowUp") { move(-1); event.preventDefault(); }
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
    var keys = " (j / k or ↓ / ↑ walk the steps)";
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

  function render(data) {
    run = data;
    R.where("Run " + run.trace_id.slice(0, 12));
    detailBox = el("div", {class: "detail", id: "detail"}, el("p", {class: "muted"}, "Select a step."));
    forkBox = el("div", {class: "fork-box", id: "fork"});
    R.mount(header(), el("div", {class: "split"},
      el("div", {class: "outline"}, R.section("Timeline", lanes()), R.section("Spans", tree())),
      el("div", {class: "side"}, detailBox, forkBox, derived())));
    document.addEventListener("keydown", keys);
    var match = /^#(event|step)-(\d+)$/.exec(location.hash) || [];
    var wanted = run.events.find(function (e) {
      return match[1] === "event" ? e.index === Number(match[2]) : match[1] === "step" && e.step === Number(match[2]);
    }) || run.events.find(function (e) { return e.step !== null; });
    if (wanted) select(wanted.index);
  }

  R.pages.trace = function (ids) {
    if (R.data && R.data.trace) { render(R.data.trace); return; }
    R.get("/v1/ui/traces/" + ids[0]).then(render, R.fail);
  };
})(Rewind);
