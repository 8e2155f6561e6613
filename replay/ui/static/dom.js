/* Rewind web UI: shared helpers. Every recorded string goes in as a text node, never as markup. */
"use strict";
var Rewind = (function () {
  var R = {};
  var page = JSON.parse(document.getElementById("rewind-page").textContent);
  var dataNode = document.getElementById("rewind-data");
  R.page = page;
  R.shared = Boolean(page.shared);
  R.data = dataNode ? JSON.parse(dataNode.textContent) : null;

  /* el("div", {class: "x", onclick: fn, style: {left: "2%"}}, "text", child, [more]) */
  R.el = function (tag, attrs) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      var value = attrs[key];
      if (value === null || value === undefined || value === false) return;
      if (key.slice(0, 2) === "on") node.addEventListener(key.slice(2), value);
      else if (key === "text") node.textContent = String(value);
      else if (key === "style") Object.assign(node.style, value); /* the pages' policy forbids style attributes */
      else node.setAttribute(key, value === true ? "" : String(value));
    });
    for (var i = 2; i < arguments.length; i++) R.append(node, arguments[i]);
    return node;
  };
  R.append = function (node, child) {
    if (child === null || child === undefined || child === false) return node;
    if (Array.isArray(child)) child.forEach(function (c) { R.append(node, c); });
    else if (child instanceof Node) node.appendChild(child);
    else node.appendChild(document.createTextNode(String(child)));
    return node;
  };
  R.clear = function (node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  };
  R.mount = function () {
    var app = R.clear(document.getElementById("app"));
    for (var i = 0; i < arguments.length; i++) R.append(app, arguments[i]);
    return app;
  };
  R.where = function (text) {
    document.getElementById("where").textContent = text;
    document.title = text + " · Rewind";
  };

  /* JSON from the worker, or from the data a shared file carries. */
  R.get = function (path) {
    return fetch(path, {credentials: "same-origin", headers: {accept: "application/json"}})
      .then(function (response) {
        return response.json().then(function (body) {
          if (!response.ok) throw new Error(body.error || ("HTTP " + response.status));
          return body;
        });
      });
  };

  /* A link to another page; a shared file has no pages to go to, so it shows the text. */
  R.link = function (href, text, attrs) {
    if (R.shared) return R.el("span", attrs || {}, text);
    return R.el("a", Object.assign({href: href}, attrs || {}), text);
  };
  R.traceLink = function (id, text) {
    return R.link("/traces/" + encodeURIComponent(id), text || id.slice(0, 12), {class: "id", title: id});
  };

  R.ms = function (value) {
    if (value === null || value === undefined) return "";
    if (value >= 1000) return (value / 1000).toFixed(2) + " s";
    return value.toFixed(value < 10 ? 2 : 0) + " ms";
  };
  R.cost = function (value) {
    return value === null || value === undefined ? "unpriced" : "$" + Number(value).toFixed(6);
  };
  /* A row's cost in the waterfall: few digits, the run's total says the rest. */
  R.shortCost = function (value) {
    if (value === null || value === undefined) return "–";
    return value >= 0.01 ? "$" + value.toFixed(2) : value > 0 ? "$" + value.toPrecision(2) : "$0";
  };
  R.num = function (value) { return Number(value || 0).toLocaleString("en"); };
  R.time = function (value) { return value ? String(value).replace("T", " ").slice(0, 19) + " UTC" : ""; };

  /* One argument for a POSIX shell, as Python's shlex.quote writes it. */
  R.quote = function (word) {
    word = String(word);
    if (word && /^[\w@%+=:,./-]+$/.test(word)) return word;
    return "'" + word.replace(/'/g, "'\"'\"'") + "'";
  };

  R.copyButton = function (source) {
    var button = R.el("button", {type: "button", class: "copy", onclick: function () {
      var text = typeof source === "function" ? source() : source;
      var done = function () { button.textContent = "Copied"; setTimeout(function () { button.textContent = "Copy"; }, 1500); };
      if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, done);
      else { var area = R.el("textarea", {}, text); document.body.appendChild(area); area.select(); document.execCommand("copy"); area.remove(); done(); }
    }}, "Copy");
    return button;
  };
  R.command = function (id, text) {
    var code = R.el("code", {id: id}, text);
    return R.el("div", {class: "command"}, code, R.copyButton(function () { return code.textContent; }));
  };

  R.pre = function (text, attrs) { return R.el("pre", attrs || {}, text); };
  R.json = function (value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  };
  R.section = function (title) {
    var rest = Array.prototype.slice.call(arguments, 1);
    return R.el("section", {}, R.el("h3", {}, title), rest);
  };
  /* A section closed until asked for: long raw text stays out of the way. */
  R.folded = function (title) {
    var rest = Array.prototype.slice.call(arguments, 1);
    return R.el("details", {class: "folded"}, R.el("summary", {}, title), rest);
  };
  R.fail = function (error) {
    R.mount(R.el("p", {class: "error", id: "failure"}, String(error.message || error)));
  };
  R.pages = {};
  return R;
})();
