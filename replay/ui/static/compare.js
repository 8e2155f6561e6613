/* Two runs: the diff page (aligned steps side by side) and the bisect page (first divergence). */
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
      return el("div", {class: "field-diff"}, el("div", {class: "path"}, f.path),
        el("div", {class: "sides"},
          el("div", {class: "left"}, el("span", {class: "muted"}, leftName), marked(f.left, "del")),
          el("div", {class: "right"}, el("span", {class: "muted"}, rightName), marked(f.right, "ins"))));
    }));
  }

  function side(s, trace) {
    if (!s) return el("div", {class: "empty muted"}, "—");
    return el("div", {}, el("div", {class: "step-name"},
      R.link("/traces/" + trace + "#step-" + s.step, "#" + s.step + " " + s.name)),
      el("pre", {class: "gist"}, s.gist));
  }

  function pair(p, data) {
    return el("div", {class: "pair status-" + p.status, id: "pair-" + p.position},
      el("div", {class: "pair-head"}, el("span", {class: "badge " + p.status}, TITLES[p.status] || p.status)),
      el("div", {class: "sides"}, el("div", {class: "left"}, side(p.left, data.left)),
        el("div", {class: "right"}, side(p.right, data.right))),
      fields("Request", p.request, "left", "right"), fields("Answer", p.response, "left", "right"));
  }

  function renderDiff(data) {
    R.where("Diff");
    var c = data.counts;
    var jump = data.first_difference === null ? el("p", {id: "identical"}, "The runs match step for step.")
      : el("button", {type: "button", id: "jump", onclick: function () {
        var target = document.getElementById("pair-" + data.first_difference);
        target.scrollIntoView({block: "start"});
        target.classList.add("flash");
      }}, "Jump to the first divergence");
    R.mount(el("h1", {}, "Diff"),
      el("p", {}, "Left ", R.traceLink(data.left, data.left), " · right ", R.traceLink(data.right, data.right)),
      el("p", {class: "muted"}, c.same + " same · " + c.changed + " request changed · " + c.answer +
        " answer changed · " + c.removed + " only left · " + c.inserted + " only right"),
      jump, el("div", {class: "pairs", id: "pairs"}, data.pairs.map(function (p) { return pair(p, data); })));
  }

  function renderBisect(data) {
    R.where("Bisect");
    var body;
    if (data.identical) body = el("p", {id: "cause"}, "The runs match: " + data.matched_before + " steps, same answers.");
    else body = [el("h2", {id: "cause"}, data.cause_title || data.cause || "divergence"),
      el("p", {id: "cause-detail"}, data.detail),
      el("div", {class: "sides"},
        el("div", {class: "left"}, el("h4", {}, "Good: step " + data.good_step + " " + data.good_name), el("pre", {class: "gist"}, data.good_preview)),
        el("div", {class: "right"}, el("h4", {}, "Bad: step " + data.bad_step + " " + data.bad_name), el("pre", {class: "gist"}, data.bad_preview))),
      fields("Request", data.request, "good", "bad"), fields("Answer", data.response, "good", "bad"),
      el("p", {class: "muted"}, "Checked, in order: " + (data.checked || []).join(", "))];
    R.mount(el("h1", {}, "Bisect"),
      el("p", {}, "Good ", R.traceLink(data.good, data.good), " · bad ", R.traceLink(data.bad, data.bad)),
      body, R.section("Matched before the divergence (" + data.matched_before + ")",
        el("ol", {id: "matched"}, data.matched_steps.map(function (m) {
          return el("li", {}, "good #" + m.good_step + " = bad #" + m.bad_step + " " + m.name);
        }))));
  }

  R.pages.diff = function (ids) {
    R.get("/v1/ui/diff?left=" + ids[0] + "&right=" + ids[1]).then(renderDiff, R.fail);
  };
  R.pages.bisect = function (ids) {
    R.get("/v1/ui/bisect?good=" + ids[0] + "&bad=" + ids[1]).then(renderBisect, R.fail);
  };
})(Rewind);
