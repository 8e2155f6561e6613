// An agent with the real `openai` npm package and no instrumentation at all: the SDK reads
// OPENAI_BASE_URL, which `rewind record --proxy` and the replay point at the proxy
// (tests/test_proxy_record.py).
const OpenAI = require("openai");
const { converse } = require("./weather_turns");

const client = new OpenAI({ apiKey: process.env.OPENAI_API_KEY || "sk-x", maxRetries: 0 });
converse(client).catch((error) => { console.error(String(error)); process.exit(1); });
