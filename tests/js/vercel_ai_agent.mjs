// An agent on the Vercel AI SDK (`ai`, `@ai-sdk/openai`) with its own telemetry
// (experimental_telemetry), its spans sent with the standard OTLP/HTTP exporter: no Rewind code.
// A tool call answered by generateText, then by streamText, each in two steps
// (tests/test_replay_vercel_ai.py).
import { NodeTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-node";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { trace } from "@opentelemetry/api";
import { generateText, jsonSchema, stepCountIs, streamText, tool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": process.env.OTEL_SERVICE_NAME }),
  spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: process.env.OTLP_TRACES_URL }))],
});
provider.register();

const openai = createOpenAI({ baseURL: process.env.LLM_URL, apiKey: "sk-x" });
const tools = {
  get_weather: tool({
    description: "The weather in a city.",
    inputSchema: jsonSchema({ type: "object", properties: { city: { type: "string" } } }),
    execute: async ({ city }) => `sunny, 21C in ${city}`,
  }),
};
const ask = 'say "Let me look that up." call get_weather {"city": "Paris"}';
const telemetry = { isEnabled: true, functionId: "weather" };

async function main() {
  await trace.getTracer("agent").startActiveSpan("run", async (run) => {  // one trace
    const plain = await generateText({
      model: openai.chat("gpt-4o"), system: "Use tools.", prompt: ask, tools,
      stopWhen: stepCountIs(2), maxRetries: 0, experimental_telemetry: telemetry });
    console.log("generated:", JSON.stringify(plain.steps.map((s) => s.text)));
    const streamed = streamText({
      model: openai.chat("gpt-4o"), system: "Use tools.", prompt: ask, tools,
      stopWhen: stepCountIs(2), maxRetries: 0, experimental_telemetry: telemetry });
    let text = "";
    for await (const part of streamed.textStream) text += part;
    console.log("streamed:", JSON.stringify(text), (await streamed.steps).length, "steps");
    run.end();
  });
  await provider.shutdown();
}

main().catch((error) => { console.error(error); process.exit(1); });
