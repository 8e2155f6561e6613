// The conversation the JavaScript agents hold with the real `openai` npm package: a tool call
// answered plainly, then streamed (openinference_agent.js, proxy_agent.js).
const tools = [{ type: "function", function: { name: "get_weather", parameters: {
  type: "object", properties: { city: { type: "string" } } } } }];
const ask = 'say "Let me look that up." call get_weather {"city": "Paris"}';

async function turn(client, messages, stream) {
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

// Each turn printed: what the model said, the tools it called and its final answer.
async function converse(client) {
  for (const stream of [false, true]) {
    const messages = [{ role: "system", content: "Use tools." }, { role: "user", content: ask }];
    const [text, calls] = await turn(client, messages, stream);
    console.log("said:", text, "| calls:", JSON.stringify(calls.map((c) => [c[1], c[2]])));
    messages.push({ role: "assistant", content: text, tool_calls: calls.map(([id, name, args]) => (
      { id, type: "function", function: { name, arguments: args } })) });
    for (const [id] of calls) messages.push({ role: "tool", tool_call_id: id, content: "sunny, 21C" });
    console.log("final:", (await turn(client, messages, stream))[0]);
  }
}

module.exports = { converse };
