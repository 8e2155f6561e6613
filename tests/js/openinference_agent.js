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

const { converse } = require("./weather_turns");

// LLM_URL when the test names the model's server; else the SDK's own OPENAI_BASE_URL (which
// `rewind-replay --proxy` sets to its replay endpoint).
const baseURL = process.env.LLM_URL ? process.env.LLM_URL + "/v1" : undefined;
const client = new OpenAI({ baseURL, apiKey: "sk-x", maxRetries: 0 });

async function main() {
  await trace.getTracer("agent").startActiveSpan("run", async (run) => {  // one trace
    await converse(client);
    run.end();
  });
  await provider.shutdown();
}

main().catch((error) => { console.error(error); process.exit(1); });
