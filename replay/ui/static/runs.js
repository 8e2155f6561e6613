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

  function row(run, depth) {
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
    var cells = [
      name, el("td", {}, run.Service), el("td", {}, run.Model),
      el("td", {class: "num"}, R.num(run.LlmCalls)), el("td", {class: "num"}, tokens),
      el("td", {class: "num"}, run.Unpriced ? "≥ " + R.cost(run.CostUsd) : R.cost(run.CostUsd)),
      el("td", {class: "num"}, R.ms(run.DurationNs / 1e6)),
      el("td", {class: run.Errors ? "num error" : "num"}, R.num(run.Errors)),
      el("td", {class: "muted"}, R.time(run.Start)),
    ];
    var rows = [el("tr", {class: "run", "data-trace": run.TraceId}, cells)];
    (run.Derived || []).forEach(function (child) { rows = rows.concat(row(child, depth + 1)); });
    return rows;
  }

  function table(runs) {
    if (!runs.length) return el("p", {class: "muted", id: "no-runs"}, "No runs match.");
    var head = ["Run", "Service", "Model", "Calls", "Tokens in / out", "Cost", "Duration", "Errors", "Started"];
    return el("table", {class: "runs", id: "runs"},
      el("thead", {}, el("tr", {}, head.map(function (h) { return el("th", {}, h); }))),
      el("tbody", {}, runs.map(function (run) { return row(run, 0); })));
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
    R.mount(el("h1", {}, "Runs"), form, table(data.runs),
      el("p", {class: "muted"}, collect(data.runs, "TraceId", []).length + " run(s), newest first."));
  }

  function load() {
    var chosen = query();
    var params = new URLSearchParams();
    FILTERS.forEach(function (name) { if (chosen[name]) params.set(name, chosen[name]); });
    R.get("/v1/ui/runs?" + params).then(function (data) { render(data, chosen); }, R.fail);
  }

  R.pages.runs = function () { R.where("Runs"); load(); };
})(Rewind);
