/* A step in full, drawn as what it is: a model call (what it saw, what it answered), a tool
   (arguments, result or error), an HTTP call (method, URL -> status, headers, bodies, a stream
   event by event), an agent (its children, input and output), a service's request, an error
   (type, message, where). */
"use strict";
(function (R) {
  var el = R.el;
  var KINDS = {llm: "LLM call", tool: "Tool call", http: "HTTP call", db: "Database call", rpc: "gRPC call", agent: "Agent",
    request: "Request served", error: "Error", context: "Another span of a model call", span: "Span"};

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
    var rows = [["Type", KINDS[d.kind] || d.kind], ["Span", d.name], ["Status", d.status], ["Latency", R.ms(d.duration_ms)]];
    if (d.type === "llm" && d.usage_reported === false) rows.push(["Model", d.model], ["Tokens in / out", "not reported"], ["Cost", "not reported"]);
    else if (d.type === "llm") rows.push(["Model", d.model], ["Tokens in / out", R.num(d.input_tokens) + " / " + R.num(d.output_tokens)], ["Cost", R.cost(d.cost_usd)]);
    if (d.tool_name) rows.push(["Tool", d.tool_name]);
    return el("dl", {class: "numbers"}, rows.map(function (r) { return [el("dt", {}, r[0]), el("dd", {}, r[1])]; }));
  }

  function headers(list, id) {
    if (!list || !list.length) return el("p", {class: "muted"}, "No headers recorded.");
    return el("table", {class: "headers", id: id}, el("tbody", {}, list.map(function (h) {
      return el("tr", {}, el("th", {}, h[0]), el("td", {}, h[1]));
    })));
  }

  function stream(events) {
    return el("table", {class: "stream", id: "stream"}, el("tbody", {}, events.map(function (ev) {
      return el("tr", {}, el("td", {class: "num"}, "+" + ev.offset_ms + " ms"), el("td", {}, R.pre(ev.data)));
    })));
  }

  /* Method, URL and status on one line: what names an HTTP call. */
  function requestLine(x) {
    var bad = x.status >= 400 || !x.status;
    return el("p", {class: "http-line", id: "http-line"}, el("b", {id: "http-method"}, x.method), " ",
      el("code", {id: "http-url"}, x.url), " → ",
      el("span", {class: "badge" + (bad ? " error" : " same"), id: "http-status"}, x.status ? String(x.status) : "no answer"),
      x.synthetic ? el("span", {class: "muted"}, " (rebuilt from content)") : null);
  }

  /* The exchange in full, open for an HTTP step, folded under a model call's messages. */
  function exchange(x, open) {
    if (!x) return null;
    var parts = [requestLine(x)];
    if (x.request_headers) {
      parts.push(el("h4", {}, "Request headers"), headers(x.request_headers, "request-headers"),
        el("h4", {}, "Request body"), x.request ? R.pre(x.request, {class: "raw", id: "raw-request"}) : el("p", {class: "muted", id: "raw-request"}, "No body."),
        el("h4", {}, "Response headers"), headers(x.response_headers, "response-headers"));
      if (x.streamed) parts.push(el("h4", {}, "Stream (" + x.events.length + " events)"), stream(x.events));
      else parts.push(el("h4", {}, "Response body"), x.response ? R.pre(x.response, {class: "raw", id: "raw-response"}) : el("p", {class: "muted", id: "raw-response"}, "No body."));
    }
    if (open) return el("section", {class: "exchange", id: "exchange"}, parts);
    return R.folded("Raw exchange", parts);
  }

  function failure(x) {
    if (!x) return null;
    return el("section", {class: "exception", id: "exception"}, el("h3", {}, "Error"),
      el("p", {class: "error"}, x.type ? el("b", {id: "exception-type"}, x.type) : null, x.type && x.message ? ": " : "",
        el("span", {id: "exception-message"}, x.message)),
      x.where ? [el("h4", {}, "Where"), R.pre(x.where, {id: "exception-where", class: "raw"})] : null);
  }

  function children(d, hooks) {
    var kids = hooks.children(d.index);
    if (!kids.length) return el("p", {class: "muted"}, "No steps under it.");
    return el("ol", {class: "children", id: "children"}, kids.map(function (e) {
      return el("li", {}, el("button", {type: "button", class: "link", onclick: function () { hooks.select(e.index); }},
        R.stepLabel(e)), " ", el("span", {class: "muted"}, e.kind + " · " + R.ms(e.duration_ms)));
    }));
  }

  function body(d, hooks) {
    if (d.kind === "tool") {
      return [R.section("Arguments", R.pre(R.json(d.arguments), {id: "tool-arguments"})),
        d.exception ? null : R.section("Result", messages(d.output, "answer"))];
    }
    if (d.kind === "http" || d.kind === "db") return d.http ? exchange(d.http, true) : null;
    if (d.kind === "request") return hooks.served(d.request);
    if (d.kind === "agent" || d.kind === "workflow") {
      var io = d.agent_io || {};
      return [R.section("Steps under it", children(d, hooks)),
        io.input ? R.section("Input", R.pre(io.input, {id: "agent-input"})) : null,
        io.output ? R.section("Output", R.pre(io.output, {id: "agent-output"})) : null];
    }
    if (d.kind === "llm" || d.kind === "context") {
      return [R.section("Context the model saw", messages(d.input, "context")),
        d.tools && d.tools.length ? R.folded("Tools offered (" + d.tools.length + ")", R.pre(R.json(d.tools))) : null,
        d.params && Object.keys(d.params).length ? R.section("Parameters", R.pre(R.json(d.params))) : null,
        R.section("Answer", messages(d.output, "answer")), exchange(d.exchange, false)];
    }
    return [d.http ? exchange(d.http, true) : null, hooks.children(d.index).length ? R.section("Steps under it", children(d, hooks)) : null];
  }

  /* hooks: children(index) -> outline rows under it; select(index); served(inbound) -> node. */
  R.stepView = function (d, hooks) {
    var parts = [el("h2", {}, el("span", {class: "badge kind-" + d.kind}, d.kind), " ", R.stepLabel(d)), numbers(d)];
    if (d.exception) parts.push(failure(d.exception));
    else if (d.error) parts.push(el("p", {class: "error", id: "step-error"}, d.error));
    if (!d.content) {
      if (d.http) parts.push(requestLine(d.http));
      parts.push(el("p", {class: "muted"}, "Shared without content: messages and bodies left out."));
    } else parts.push(body(d, hooks));
    parts.push(R.folded("Span attributes", R.pre(R.json(d.attributes))));
    return parts;
  };
})(Rewind);
