/* Two runs: the diff page (aligned steps side by side, quiet steps folded, each change shown
   once, n/p walk the changes) and the bisect page (first divergence, fork it). */
"use strict";
(function (R) {
  var el = R.el;
  var TITLES = {same: "same", changed: "request changed", answer: "answer changed",
    removed: "only in the left run", inserted: "only in the right run"};

  /* [[text, changed], ...] with the changed words marked. */
  function marked(segments, kind) {
    return el("pre", {class: "field-text"}, segments.map(function (s) {
      return s[1] ? el("mark", {class: kind}, s[0]) : s[0];
    }));
  }

  function fields(title, list, leftName, rightName) {
    if (!list.length) return null;
    return el("div", {class: "fields"}, el("h4", {}, title), list.map(function (f) {
      var later = f.later ? el("span", {class: "later badge"}, "and " + f.later + " later step" + (f.later > 1 ? "s" : "")) : null;
      return el("div", {class: "field-diff"}, el("div", {class: "path"}, f.path, " ", later),
        el("div", {class: "sides"},
          el("div", {class: "left"}, el("span", {class: "muted"}, leftName), marked(f.left, "del")),
          el("div", {class: "right"}, el("span", {class: "muted"}, rightName), marked(f.right, "ins"))));
    }));
  }

  function stepLink(trace, s, text) {
    return R.link("/traces/" + trace + "#step-" + s.step, text || "#" + s.step + " " + s.name, {class: "step-link"});
  }

  function side(s, trace) {
    if (!s) return el("div", {class: "empty muted"}, "—");
    return el("div", {}, el("div", {class: "step-name"}, stepLink(trace, s)),
      s.gist ? el("pre", {class: "gist"}, s.gist) : null);
  }

  function pair(p, data) {
    var status = p.quiet && p.status !== "same" ? "repeat" : p.status;
    var title = status === "repeat" ? "only changes shown above" : (TITLES[p.status] || p.status);
    return el("div", {class: "pair status-" + status, id: "pair-" + p.position, tabindex: "-1"},
      el("div", {class: "pair-head"}, el("span", {class: "badge " + status}, title)),
      el("div", {class: "sides"}, el("div", {class: "left"}, side(p.left, data.left)),
        el("div", {class: "right"}, side(p.right, data.right))),
      fields("Request", p.request, "left", "right"), fields("Answer", p.response, "left", "right"));
  }

  /* A run of quiet steps (unchanged, or changed only as shown above) as one line. */
  function folded(run, data) {
    var first = run[0], last = run[run.length - 1];
    var where = function (p) { return "#" + (p.right || p.left).step; };
    var same = run.filter(function (p) { return p.status === "same"; }).length;
    var text = run.length + (run.length > 1 ? " steps " : " step ") +
      (run.length > 1 ? where(first) + "–" + where(last) : where(first)) + ": " +
      [same ? same + " unchanged" : "", run.length - same ? (run.length - same) + " with only the changes shown above" : ""]
        .filter(Boolean).join(", ");
    return el("details", {class: "quiet"}, el("summary", {}, text), run.map(function (p) { return pair(p, data); }));
  }

  function walker(changes) {
    var at = -1;
    function go(step) {
      if (!changes.length) return;
      at = Math.max(0, Math.min(changes.length - 1, at + step));
      var target = document.getElementById("pair-" + changes[at]);
      document.querySelectorAll(".pair.flash").forEach(function (n) { n.classList.remove("flash"); });
      target.classList.add("flash");
      target.scrollIntoView({block: "start"});
      target.focus({preventScroll: true});
      document.getElementById("change-at").textContent = "change " + (at + 1) + " of " + changes.length;
    }
    document.addEventListener("keydown", function (e) {
      if (e.ctrlKey || e.metaKey || e.altKey || /INPUT|TEXTAREA|SELECT/.test(e.target.tagName)) return;
      if (e.key === "n") go(1);
      else if (e.key === "p") go(-1);
    });
    return go;
  }

  function renderDiff(data) {
    R.where("Diff");
    var c = data.counts;
    var rows = [], quiet = [], changes = [];
    data.pairs.forEach(function (p) {
      if (p.quiet) { quiet.push(p); return; }
      if (quiet.length) { rows.push(folded(quiet, data)); quiet = []; }
      changes.push(p.position);
      rows.push(pair(p, data));
    });
    if (quiet.length) rows.push(folded(quiet, data));
    var go = walker(changes);
    var nav = data.first_difference === null ? el("p", {id: "identical"}, "The runs match step for step.")
      : el("div", {class: "toolbar", id: "change-nav"},
        el("button", {type: "button", id: "jump", onclick: function () { go(-changes.length); }}, "Jump to the first divergence"), " ",
        el("button", {type: "button", id: "prev-change", onclick: function () { go(-1); }}, "Previous change (p)"), " ",
        el("button", {type: "button", id: "next-change", onclick: function () { go(1); }}, "Next change (n)"), " ",
        el("span", {class: "muted", id: "change-at"}, changes.length + " change(s) shown"));
    var summary = [c.same + " same", c.changed + " request changed", c.answer + " answer changed",
      c.removed + " only left", c.inserted + " only right"].join(" · ") +
      (c.repeating ? " (" + c.repeating + " repeating changes shown once)" : "");
    R.mount(el("h1", {}, "Diff"),
      el("p", {}, "Left ", R.traceLink(data.left, data.left), " · right ", R.traceLink(data.right, data.right)),
      el("p", {class: "muted", id: "diff-counts"}, summary),
      nav, el("div", {class: "pairs", id: "pairs"}, rows));
  }

  /* The good run's fork form at the diverging step, filled with the bad run's input. */
  function forkLink(data) {
    var f = data.fork;
    if (!f || R.shared) return null;
    var params = new URLSearchParams({"fork-step": String(f.step)});
    if (f.edit) params.set("fork-edit", f.edit);
    if (f.model) params.set("fork-model", f.model);
    if (f.params.length) params.set("fork-params", f.params.join("\n"));
    return el("p", {}, R.link("/traces/" + data.good + "?" + params + "#step-" + f.step,
      "Fork the good run at step " + f.step + " with the bad run's input", {id: "fork-here"}));
  }

  /* The run page's fork form, filled as the bisect page's link asks (?fork-step=N&...). */
  R.prefillFork = function (step, inputs) {
    var asked = new URLSearchParams(location.search);
    if (asked.get("fork-step") !== String(step)) return;
    ["edit", "system", "model", "params"].forEach(function (name) {
      var value = asked.get("fork-" + name);
      if (value && inputs[name]) inputs[name].value = value;
    });
  };

  function renderBisect(data) {
    R.where("Bisect");
    var body;
    var good = {step: data.good_step, name: data.good_name}, bad = {step: data.bad_step, name: data.bad_name};
    if (data.identical) body = el("p", {id: "cause"}, "The runs match: " + data.matched_before + " steps, same answers.");
    else body = [el("h2", {id: "cause"}, data.cause_title || data.cause || "divergence"),
      el("p", {id: "cause-detail"}, data.detail),
      el("div", {class: "sides"},
        el("div", {class: "left"}, el("h4", {}, "Good: ", data.good_step === null ? "no step" : stepLink(data.good, good, "step " + data.good_step + " " + data.good_name)),
          el("pre", {class: "gist"}, data.good_preview)),
        el("div", {class: "right"}, el("h4", {}, "Bad: ", data.bad_step === null ? "no step" : stepLink(data.bad, bad, "step " + data.bad_step + " " + data.bad_name)),
          el("pre", {class: "gist"}, data.bad_preview))),
      forkLink(data),
      fields("Request", data.request, "good", "bad"), fields("Answer", data.response, "good", "bad"),
      el("p", {class: "muted"}, "Checked, in order: " + (data.checked || []).join(", "))];
    var steps = data.matched_steps || [];
    var before = data.identical || !steps.length ? null : R.section(
      "Matched before the divergence (" + (steps.length < data.matched_before ? "last " + steps.length + " of " : "") + data.matched_before + ")",
      el("ol", {id: "matched"}, steps.map(function (m) {
        return el("li", {}, stepLink(data.good, {step: m.good_step, name: m.name}, "good #" + m.good_step), " = ",
          stepLink(data.bad, {step: m.bad_step, name: m.name}, "bad #" + m.bad_step), " " + m.name);
      })));
    R.mount(el("h1", {}, "Bisect"),
      el("p", {}, "Good ", R.traceLink(data.good, data.good), " · bad ", R.traceLink(data.bad, data.bad)),
      body, before);
  }

  R.pages.diff = function (ids) {
    R.get("/v1/ui/diff?left=" + ids[0] + "&right=" + ids[1]).then(renderDiff, R.fail);
  };
  R.pages.bisect = function (ids) {
    R.get("/v1/ui/bisect?good=" + ids[0] + "&bad=" + ids[1]).then(renderBisect, R.fail);
  };
})(Rewind);
