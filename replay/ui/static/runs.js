/* The runs page: recent traces, filtered; forks and replays under the run they came from. */
"use strict";
(function (R) {
  var el = R.el;
  var FILTERS = ["q", "service", "model", "since", "errors"];
  var PERIODS = [["", "Any time"], ["1h", "Last hour"], ["24h", "Last day"], ["7d", "Last week"], ["30d", "Last month"]];

  function query() {
    var params = new URLSearchParams(location.search);
    var out = {};
    FILTERS.forEach(function (name) { out[name] = params.get(name) || ""; });
    return out;
  }

  function options(values, chosen, label) {
    var seen = {};
    var list = [el("option", {value: ""}, label)];
    values.concat(chosen ? [chosen] : []).forEach(function (v) {
      if (v && !seen[v]) { seen[v] = true; list.push(el("option", {value: v, selected: v === chosen}, v)); }
    });
    return list;
  }

  function collect(rows, field, into) {
    rows.forEach(function (row) { into.push(row[field]); collect(row.Derived || [], field, into); });
    return into;
  }

  /* What a run was asked and answered, one line each (the run page has the whole text). */
  function previews(run) {
    var lines = [];
    if (run.Input) lines.push(el("div", {class: "preview asked", title: run.Input}, el("span", {class: "muted"}, "→ "), run.Input));
    if (run.Output) lines.push(el("div", {class: "preview answered", title: run.Output}, el("span", {class: "muted"}, "← "), run.Output));
    return lines;
  }

  function counts(run) {
    return el("td", {class: "calls"}, [[run.LlmCalls, "LLM"], [run.ToolCalls, "tool"], [run.HttpCalls, "HTTP"]]
      .map(function (c) { return el("span", {class: c[0] ? "count" : "count muted"}, R.num(c[0]) + " " + c[1]); }));
  }

  R.conversationLink = function (id) {
    if (!id) return null;
    return R.link("/conversations/" + encodeURIComponent(id), id, {class: "conversation", title: "conversation " + id});
  };

  function row(run, depth, picked) {
    var tokens = R.num(run.InputTokens) + " / " + R.num(run.OutputTokens) +
      (run.Unreported ? " (+" + run.Unreported + " not reported)" : "");
    var origin = run.Kind ? el("span", {class: "badge " + run.Kind}, run.Kind) : null;
    var name = el("td", {class: "name", style: {paddingLeft: (0.5 + depth * 1.5) + "em"}},
      depth ? "↳ " : "", origin, " ", R.traceLink(run.TraceId, run.RootSpan || run.TraceId),
      el("span", {class: "id muted"}, " " + run.TraceId.slice(0, 8)));
    if (run.Source && !depth) name.appendChild(el("span", {class: "muted"}, " from ", R.traceLink(run.Source)));
    if (run.Inbound) {
      var failed = run.Inbound === "job" ? run.Status !== "ok" : Number(run.Status) >= 500;
      R.append(name, [el("div", {class: "served"}, el("code", {class: "route"}, run.Route), " ",
        el("span", {class: failed ? "badge error status" : "badge status"}, run.Status || "?"))]);
    }
    R.append(name, previews(run));
    var box = el("input", {type: "checkbox", class: "pick", value: run.TraceId, "aria-label": "select " + run.TraceId.slice(0, 8),
      checked: picked.indexOf(run.TraceId) >= 0, onchange: function () { choose(run, box.checked); }});
    var cells = [
      el("td", {class: "select"}, box), name,
      el("td", {}, el("div", {}, run.Service), el("div", {class: "muted"}, run.Model)),
      counts(run),
      el("td", {class: "num"}, el("div", {}, tokens),
        el("div", {class: "muted"}, run.Unpriced ? "≥ " + R.cost(run.CostUsd) : R.cost(run.CostUsd))),
      el("td", {class: "num"}, el("div", {}, R.ms(run.DurationNs / 1e6)), el("div", {class: "muted started"}, R.time(run.Start))),
      el("td", {class: run.Errors ? "num error" : "num"}, R.num(run.Errors)),
      el("td", {class: "conv"}, R.conversationLink(run.Conversation)),
    ];
    var rows = [el("tr", {class: "run", "data-trace": run.TraceId}, cells)];
    (run.Derived || []).forEach(function (child) { rows = rows.concat(row(child, depth + 1, picked)); });
    return rows;
  }

  /* Two runs picked open their diff, the one started first on the left. */
  var picked = [];
  var starts = {};
  function choose(run, on) {
    picked = picked.filter(function (id) { return id !== run.TraceId; });
    if (on) picked.push(run.TraceId);
    starts[run.TraceId] = run.Start;
    var button = document.getElementById("compare");
    if (!button) return;
    button.disabled = picked.length !== 2;
    button.textContent = picked.length === 2 ? "Diff the 2 selected runs" : "Select 2 runs to diff (" + picked.length + " selected)";
  }
  function compare() {
    var pair = picked.slice().sort(function (a, b) { return String(starts[a]).localeCompare(String(starts[b])); });
    location.href = "/diff/" + pair[0] + "/" + pair[1];
  }

  function table(runs) {
    if (!runs.length) return el("p", {class: "muted", id: "no-runs"}, "No runs match.");
    var head = ["", "Run", "Service · model", "Calls", "Tokens in / out · cost", "Duration · started", "Errors", "Conversation"];
    return el("table", {class: "runs", id: "runs"},
      el("thead", {}, el("tr", {}, head.map(function (h) { return el("th", {}, h); }))),
      el("tbody", {}, runs.map(function (run) { return row(run, 0, picked); })));
  }

  function render(data, chosen) {
    var form = el("form", {class: "filters", id: "filters"});
    var text = el("input", {type: "search", name: "q", value: chosen.q, placeholder: "Text in prompts or answers"});
    var service = el("select", {name: "service"}, options(collect(data.runs, "Service", []), chosen.service, "Any service"));
    var model = el("select", {name: "model"}, options(collect(data.runs, "Model", []), chosen.model, "Any model"));
    var since = el("select", {name: "since"}, PERIODS.map(function (p) {
      return el("option", {value: p[0], selected: p[0] === chosen.since}, p[1]);
    }));
    var errors = el("input", {type: "checkbox", name: "errors", value: "1", checked: chosen.errors === "1"});
    R.append(form, [text, service, model, since, el("label", {}, errors, " errors only"), el("button", {type: "submit"}, "Filter")]);
    [service, model, since, errors].forEach(function (input) {
      input.addEventListener("change", function () { form.requestSubmit(); });
    });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var params = new URLSearchParams();
      new FormData(form).forEach(function (value, key) { if (value) params.set(key, value); });
      history.replaceState(null, "", "/" + (params.toString() ? "?" + params : ""));
      load();
    });
    picked = [];
    var button = el("button", {type: "button", id: "compare", disabled: true, onclick: compare}, "Select 2 runs to diff (0 selected)");
    R.mount(el("h1", {}, "Runs"), form, el("div", {class: "toolbar"}, button, " ",
      R.link("/suites", "Regression suites", {id: "suites-link"})), table(data.runs),
      el("p", {class: "muted"}, collect(data.runs, "TraceId", []).length + " run(s), newest first."));
  }

  /* Filters changed quickly send several loads: only the newest one is drawn. */
  var loads = 0;
  function load() {
    var chosen = query();
    var params = new URLSearchParams();
    var mine = ++loads;
    FILTERS.forEach(function (name) { if (chosen[name]) params.set(name, chosen[name]); });
    R.get("/v1/ui/runs?" + params).then(function (data) {
      if (mine === loads) render(data, chosen);
    }, R.fail);
  }

  R.pages.runs = function () { R.where("Runs"); load(); };

  /* A conversation: its runs oldest first, what each was asked and answered, each a link. */
  R.pages.conversation = function (ids) {
    var data = R.data;
    R.where("Conversation");
    R.mount(el("h1", {}, "Conversation ", el("code", {class: "conversation-id"}, ids[0])),
      el("p", {class: "muted"}, data.turns.length + " turn(s), oldest first."),
      el("ol", {class: "turns", id: "turns"}, data.turns.map(function (t) {
        return el("li", {class: "turn", "data-trace": t.TraceId},
          el("div", {class: "turn-head"}, el("strong", {}, "Turn " + t.Turn), " · ",
            R.traceLink(t.TraceId, "run " + t.TraceId.slice(0, 8)), " · ", R.time(t.Start), " · ",
            R.ms(t.DurationNs / 1e6), " · " + t.ToolCalls + " tool · " + t.HttpCalls + " HTTP",
            t.Errors ? el("span", {class: "badge error"}, t.Errors + " error(s)") : null),
          el("div", {class: "message role-user"}, el("div", {class: "role"}, "user"), el("div", {class: "text"}, t.Input || "—")),
          el("div", {class: "message role-assistant"}, el("div", {class: "role"}, "answer"), el("div", {class: "text"}, t.Output || "—")));
      })));
  };
})(Rewind);
