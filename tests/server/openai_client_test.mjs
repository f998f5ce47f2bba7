// The official `openai` npm client (installed into BUILD/npm by scripts/npm_setup.sh) against
// `mmx serve` on a tiny random-weight M2 checkpoint (started by openai_client_test.sh).
// The model's words are noise, so the checks are about shapes, consistency and error classes:
// stream == non-stream at temperature 0, usage adds up, logprobs cover every token, each error
// status maps to the client's error class.
import assert from "node:assert/strict";
import { check, finish, require } from "./harness.mjs";

const OpenAI = require("openai").default ?? require("openai");
const client = new OpenAI({ baseURL: process.env.MMX_BASE_URL, apiKey: process.env.MMX_API_KEY, maxRetries: 0 });
const MODEL = "tiny-m2";
const messages = [{ role: "user", content: "Hello! Who are you?" }];

async function expectError(cls, status, fn) {
  try {
    await fn();
  } catch (e) {
    assert.ok(e instanceof cls, `expected ${cls.name}, got ${e?.constructor?.name}: ${e?.message}`);
    assert.equal(e.status, status);
    assert.equal(typeof e.error?.message, "string");
    return;
  }
  assert.fail(`expected ${cls.name}`);
}

await check("models.list", async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [MODEL]);
});

let whole;
await check("chat non-stream: shape, reasoning field, usage", async () => {
  whole = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 24, temperature: 0 });
  assert.equal(whole.object, "chat.completion");
  const c = whole.choices[0];
  assert.equal(c.message.role, "assistant");
  assert.ok(["stop", "length", "tool_calls"].includes(c.finish_reason));
  assert.ok("reasoning_content" in c.message, "minimax_m2 format has a reasoning_content field");
  // The M2 prompt opens <think>: without a </think> in 24 random tokens everything is reasoning.
  assert.ok(typeof c.message.reasoning_content === "string" || c.message.reasoning_content === null);
  assert.ok(whole.usage.prompt_tokens > 10);
  assert.ok(whole.usage.completion_tokens >= 1 && whole.usage.completion_tokens <= 24);
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + whole.usage.completion_tokens);
  assert.equal(whole.usage.dropped_reasoning_turns, 0);
});

await check("chat stream == non-stream at temperature 0, include_usage", async () => {
  const stream = await client.chat.completions.create({
    model: MODEL, messages, max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let content = "", reasoning = "", finish = null, usage = null, n = 0;
  for await (const chunk of stream) {
    n++;
    if (chunk.usage) usage = chunk.usage;
    for (const ch of chunk.choices) {
      content += ch.delta.content ?? "";
      reasoning += ch.delta.reasoning_content ?? "";
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  assert.ok(n >= 3);
  const m = whole.choices[0].message;
  assert.equal(content, m.content ?? "");
  assert.equal(reasoning, m.reasoning_content ?? "");
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.deepEqual(usage.completion_tokens, whole.usage.completion_tokens);
  assert.deepEqual(usage.prompt_tokens, whole.usage.prompt_tokens);
});

await check("seeded sampling is reproducible; n=2", async () => {
  const a = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 12, temperature: 1, seed: 42, n: 2 });
  const b = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 12, temperature: 1, seed: 42, n: 2 });
  assert.equal(a.choices.length, 2);
  assert.deepEqual(a.choices.map((c) => c.message), b.choices.map((c) => c.message));
  assert.deepEqual(a.choices.map((c) => c.index), [0, 1]);
});

await check("logprobs cover every generated token", async () => {
  const r = await client.chat.completions.create({
    model: MODEL, messages, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3,
  });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, r.usage.completion_tokens);
  for (const e of lp) {
    assert.ok(e.logprob <= 0);
    assert.equal(e.top_logprobs.length, 3);
    // greedy: the chosen token is the most likely one
    assert.ok(e.top_logprobs[0].logprob >= e.logprob - 1e-6);
  }
});

const tools = [{
  type: "function",
  function: { name: "get_weather", description: "Weather for a city",
              parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
}];
await check("tools and a tool-call history round trip", async () => {
  const r = await client.chat.completions.create({
    model: MODEL, tools, tool_choice: "auto", max_tokens: 8,
    messages: [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: null, reasoning_content: "I should call the tool.",
        tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city": "Paris"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "sunny, 21C" },
    ],
  });
  const m = r.choices[0].message;
  for (const c of m.tool_calls ?? []) {  // random weights rarely call; any call must be well-formed
    assert.equal(c.type, "function");
    JSON.parse(c.function.arguments);
  }
  assert.ok(r.usage.prompt_tokens > whole.usage.prompt_tokens, "the tools and history are in the prompt");
});

await check("completions", async () => {
  const r = await client.completions.create({ model: MODEL, prompt: "Once upon a time", max_tokens: 5, temperature: 0 });
  assert.equal(r.object, "text_completion");
  assert.equal(typeof r.choices[0].text, "string");
  assert.ok(r.usage.completion_tokens <= 5);
});

await check("error classes", async () => {
  await expectError(OpenAI.BadRequestError, 400, () =>
    client.chat.completions.create({ model: MODEL, messages, temperature: -1 }));
  await expectError(OpenAI.BadRequestError, 400, () =>
    client.chat.completions.create({ model: MODEL, messages, max_tokens: 0 }));
  await expectError(OpenAI.BadRequestError, 400, () =>
    client.chat.completions.create({ model: MODEL, messages: [{ role: "wizard", content: "x" }] }));
  await expectError(OpenAI.NotFoundError, 404, () =>
    client.chat.completions.create({ model: "gpt-4o", messages }));
  const bad = new OpenAI({ baseURL: process.env.MMX_BASE_URL, apiKey: "wrong", maxRetries: 0 });
  await expectError(OpenAI.AuthenticationError, 401, () => bad.chat.completions.create({ model: MODEL, messages }));
  await expectError(OpenAI.BadRequestError, 400, () =>
    client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "word ".repeat(5000) }] }));
});

await check("still healthy after the errors", async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 2 });
  assert.equal(r.choices.length, 1);
});

// Keep-alive (hostile-clients issue, round 2): the client's connection pool reuses connections.
// The server counts them; before, every request cost a connection (keep-alive was off).
await check("keep-alive: requests reuse connections", async () => {
  const metric = async (name) => {
    const text = await (await fetch(process.env.MMX_BASE_URL.replace(/\/v1$/, "") + "/metrics",
      { headers: { Authorization: `Bearer ${process.env.MMX_API_KEY}` } })).text();
    const m = text.match(new RegExp(`^${name} (\\S+)$`, "m"));
    assert.ok(m, `${name} in /metrics`);
    return Number(m[1]);
  };
  const conns0 = await metric("mmx_http_connections_total");
  const reqs0 = await metric("mmx_http_requests_total");
  for (let i = 0; i < 10; ++i)
    await client.chat.completions.create({ model: MODEL, messages, max_tokens: 2 });
  const conns = (await metric("mmx_http_connections_total")) - conns0;
  const reqs = (await metric("mmx_http_requests_total")) - reqs0;
  console.log(`    10 sequential requests (+ /metrics reads): ${reqs} requests on ${conns} new connections`);
  assert.ok(reqs >= 11, `requests counted: ${reqs}`);
  assert.ok(conns <= 2, `connections reused: ${conns} new for ${reqs} requests`);
});

finish();
