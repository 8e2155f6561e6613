/* A suite's page: its runs and their last results (pass, diverged with the cause, errored,
   the scores), each linked to its run and to the diff against its replay. */
"use strict";
(function (R) {
  var el = R.el;
  var BADGES = {same: "same", judged: "same", diverged: "changed", errored: "error"};

  function scores(list) {
    if (!list.length) return null;
    return el("ul", {class: "scores"}, list.map(function (s) {
      return el("li", {class: s.label === "pass" ? "" : "error"},
        s.name + ": " + s.value + " (" + s.label + ") ", el("span", {class: "muted"}, s.explanation));
    }));
  }

  function row(run) {
    var last = run.last;
    var result = last ? [el("span", {class: "badge " + (BADGES[last.status] || "")},
      (last.passed ? "pass" : "fail") + " · " + last.status),
      last.cause ? el("span", {class: "cause"}, " " + last.cause) : null] : el("span", {class: "muted"}, "never run");
    var detail = last && !last.passed ? el("pre", {class: "gist"}, last.message) : null;
    var diff = last && last.replayed ? R.link("/diff/" + run.trace_id + "/" + last.replayed, "diff") : null;
    return el("tr", {class: "suite-run", "data-trace": run.trace_id},
      el("td", {}, R.traceLink(run.trace_id)), el("td", {}, result, detail, scores(last ? last.scores : [])),
      el("td", {}, diff), el("td", {class: "muted"}, last ? R.time(last.ran_at) : ""),
      el("td", {}, el("code", {}, run.command)));
  }

  function render(data) {
    R.where("Suite " + data.name);
    var query = Object.keys(data.query || {}).map(function (k) { return k + "=" + data.query[k]; }).join(" ");
    R.mount(el("h1", {}, "Suite " + data.name),
      el("p", {class: "muted", id: "summary"}, data.runs.length + " runs · " + data.passed + " passed of " +
        data.ran + " run last time" + (query ? " · query " + query : "") +
        (data.evaluators.length ? " · evaluators " + data.evaluators.join(", ") : "")),
      el("table", {class: "runs"}, el("thead", {}, el("tr", {}, ["run", "last result", "", "when", "command"]
        .map(function (h) { return el("th", {}, h); }))), el("tbody", {}, data.runs.map(row))));
  }

  R.pages.suite = function () {
    if (R.data) render(R.data);
    else R.fail(new Error("this page carries no suite"));
  };
})(Rewind);
