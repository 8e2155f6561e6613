/* The suites page (each suite, how its last run went) and a suite's page: its runs and their
   last results (pass, diverged with the cause, errored, the scores), each linked to its run
   and to the diff against its replay. A badge is green only for a run that passed. */
"use strict";
(function (R) {
  var el = R.el;
  var FAILED = {diverged: "changed", errored: "error", judged: "error"};

  function count(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }

  function badge(last) {
    return el("span", {class: "badge " + (last.passed ? "same" : FAILED[last.status] || "error")},
      (last.passed ? "pass" : "fail") + " · " + last.status);
  }

  function scores(list) {
    if (!list.length) return null;
    return el("ul", {class: "scores"}, list.map(function (s) {
      return el("li", {class: s.label === "pass" ? "" : "error"},
        s.name + ": " + s.value + " (" + s.label + ") ", el("span", {class: "muted"}, s.explanation));
    }));
  }

  function row(run) {
    var last = run.last;
    var result = last ? [badge(last),
      last.cause ? el("span", {class: "cause"}, " " + last.cause) : null] : el("span", {class: "muted"}, "never run");
    var detail = last && !last.passed ? el("pre", {class: "gist"}, last.message) : null;
    var diff = last && last.replayed ? R.link("/diff/" + run.trace_id + "/" + last.replayed, "diff") : null;
    var bisect = last && last.replayed && last.status === "diverged" ?
      [" · ", R.link("/bisect/" + run.trace_id + "/" + last.replayed, "bisect")] : null;
    return el("tr", {class: "suite-run", "data-trace": run.trace_id},
      el("td", {}, R.traceLink(run.trace_id)), el("td", {}, result, detail, scores(last ? last.scores : [])),
      el("td", {}, diff, bisect), el("td", {class: "muted"}, last ? R.time(last.ran_at) : ""),
      el("td", {}, el("code", {}, run.command)));
  }

  function render(data) {
    R.where("Suite " + data.name);
    var index = R.link("/suites", "All suites");
    var query = Object.keys(data.query || {}).map(function (k) { return k + "=" + data.query[k]; }).join(" ");
    R.mount(el("p", {}, index), el("h1", {}, "Suite " + data.name),
      el("p", {class: "muted", id: "summary"}, count(data.runs.length, "run") + " · " + data.passed +
        " passed of " + data.ran + " run last time" + (query ? " · query " + query : "") +
        (data.evaluators.length ? " · evaluators " + data.evaluators.join(", ") : "")),
      el("table", {class: "runs"}, el("thead", {}, el("tr", {}, ["run", "last result", "", "when", "command"]
        .map(function (h) { return el("th", {}, h); }))), el("tbody", {}, data.runs.map(row))));
  }

  function suiteRow(suite) {
    var outcome = !suite.ran ? el("span", {class: "muted"}, "never run") :
      el("span", {class: "badge " + (suite.failed ? "error" : "same")},
        suite.passed + " passed" + (suite.failed ? " · " + suite.failed + " failed" : ""));
    return el("tr", {class: "suite", "data-suite": suite.name},
      el("td", {}, R.link("/suites/" + encodeURIComponent(suite.name), suite.name)),
      el("td", {}, count(suite.runs, "run")), el("td", {}, outcome),
      el("td", {class: "muted"}, R.time(suite.last_ran)));
  }

  R.pages.suites = function () {
    var suites = (R.data && R.data.suites) || [];
    R.where("Suites");
    R.mount(el("h1", {}, "Regression suites"),
      suites.length ? el("table", {class: "runs", id: "suites"}, el("thead", {}, el("tr", {},
        ["suite", "runs", "last run", "when"].map(function (h) { return el("th", {}, h); }))),
        el("tbody", {}, suites.map(suiteRow))) :
        el("p", {class: "muted"}, "No suite yet: `rewind suite add NAME TRACE_ID …` makes one."));
  };

  R.pages.suite = function () {
    if (R.data) render(R.data);
    else R.fail(new Error("this page carries no suite"));
  };
})(Rewind);
