// An agent instrumented with OpenInference's JavaScript OpenAI instrumentation (Arize Phoenix),
// its spans sent with the standard OTLP/HTTP exporter: no Rewind code. A tool call answered
// plainly, then streamed (tests/test_replay_openinference_js.py).
const { NodeTracerProvider, SimpleSpanProcessor } = require("@opentelemetry/sdk-trace-node");
const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-http");
const { resourceFromAttributes } = require("@opentelemetry/resources");
const { trace } = require("@opentelemetry/api");

const exporter = new OTLPTraceExporter({ url: process.env.OTLP_TRACES_URL });
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": process.env.OTEL_SERVICE_NAME }),
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});
provider.register();
const { OpenAIInstrumentation } = require("@arizeai/openinference-instrumentation-openai");
const OpenAI = require("openai");
new OpenAIInstrumentation().manuallyInstrument(OpenAI);

const client = new OpenAI({ baseURL: process.env.LLM_URL + "/v1", apiKey: "sk-x", maxRetries: 0 });
const tools = [{ type: "function", function: { name: "get_weather", parameters: {
  type: "object", properties: { city: { type: "string" } } } } }];
const ask = 'say "Let me look that up." call get_weather {"city": "Paris"}';

async function turn(messages, stream) {
  if (!stream) {
    const reply = await client.chat.completions.create({ model: "gpt-4o", messages, tools });
    const message = reply.choices[0].message;
    const calls = (message.tool_calls || []).map((c) => [c.id, c.function.name, c.function.arguments]);
    return [message.content || "", calls];
  }
  let text = "";
  const calls = {};
  const chunks = await client.chat.completions.create({
    model: "gpt-4o", messages, tools, stream: true, stream_options: { include_usage: true } });
  for await (const chunk of chunks) {
    const delta = chunk.choices.length ? chunk.choices[0].delta : null;
    text += (delta && delta.content) || "";
    for (const c of (delta && delta.tool_calls) || []) {
      const seen = calls[c.index] || (calls[c.index] = [c.id, c.function.name, ""]);
      seen[2] += c.function.arguments || "";
    }
  }
  return [text, Object.values(calls)];
}

async function main() {
  await trace.getTracer("agent").startActiveSpan("run", async (run) => {  // one trace
    for (const stream of [false, true]) {
      const messages = [{ role: "system", content: "Use tools." }, { role: "user", content: ask }];
      const [text, calls] = await turn(messages, stream);
      console.log("said:", text, "| calls:", JSON.stringify(calls.map((c) => [c[1], c[2]])));
      messages.push({ role: "assistant", content: text, tool_calls: calls.map(([id, name, args]) => (
        { id, type: "function", function: { name, arguments: args } })) });
      for (const [id] of calls) messages.push({ role: "tool", tool_call_id: id, content: "sunny, 21C" });
      console.log("final:", (await turn(messages, stream))[0]);
    }
    run.end();
  });
  await provider.shutdown();
}

main().catch((error) => { console.error(error); process.exit(1); });
