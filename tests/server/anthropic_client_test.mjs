// The official `@anthropic-ai/sdk` npm client (installed into BUILD/npm by scripts/npm_setup.sh)
// against `mmx serve` on a tiny random-weight M2 checkpoint (started by anthropic_client_test.sh
// through openai_client_test.sh). The model's words are noise, so the checks are about shapes,
// the event sequence, consistency (stream == non-stream at temperature 0, count_tokens == the
// usage of the same request) and error classes carrying our messages. A random tiny model rarely
// writes a tool call by itself, so tool_use output comes from a forced one (tool_choice tool: the
// constrained decoder makes it write M2's tool-call syntax); a scripted M2 tool block is tested
// over the fake engine (tests/server/anthropic_test.cpp).
import assert from "node:assert/strict";
import { check, finish, require } from "./harness.mjs";

const sdk = require("@anthropic-ai/sdk");
const Anthropic = sdk.default ?? sdk.Anthropic ?? sdk;
// The SDK appends /v1/messages itself.
const baseURL = process.env.MMX_BASE_URL.replace(/\/v1\/?$/, "");
const client = new Anthropic({ baseURL, apiKey: process.env.MMX_API_KEY, maxRetries: 0 });  // sent as x-api-key
const MODEL = "tiny-m2";
const messages = [{ role: "user", content: "Hello! Who are you?" }];
const tools = [{ name: "get_weather", description: "Weather for a city",
                 input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }];

// The SDK's error class for the status, with our message (it reads error.message of our body).
async function expectError(cls, status, words, fn) {
  try {
    await fn();
  } catch (e) {
    assert.ok(e instanceof cls, `expected ${cls.name}, got ${e?.constructor?.name}: ${e?.message}`);
    assert.equal(e.status, status);
    assert.equal(e.error?.type, "error", JSON.stringify(e.error));
    assert.ok(e.message.includes(words), `message lacks '${words}': ${e.message}`);
    return;
  }
  assert.fail(`expected ${cls.name}`);
}
function checkShape(m) {
  assert.equal(m.type, "message");
  assert.equal(m.role, "assistant");
  assert.equal(m.model, MODEL);
  assert.match(m.id, /^msg_/);
  assert.ok(["end_turn", "max_tokens", "stop_sequence", "tool_use"].includes(m.stop_reason), m.stop_reason);
  for (const b of m.content) assert.ok(["thinking", "text", "tool_use"].includes(b.type), b.type);
  const kinds = m.content.map((b) => b.type).join(",");
  assert.match(kinds, /^(thinking,?)?(text,?)?(tool_use,?)*$/, `block order ${kinds}`);
  assert.ok(m.usage.input_tokens + m.usage.cache_read_input_tokens > 10);
  assert.ok(m.usage.output_tokens >= 1);
}

let whole;
await check("messages.create: shape, thinking first, usage", async () => {
  whole = await client.messages.create({ model: MODEL, max_tokens: 24, messages, temperature: 0,
                                         system: "Be brief.", metadata: { user_id: "u1" } });
  checkShape(whole);
  assert.ok(whole.usage.output_tokens <= 24);
  // The M2 prompt opens <think>: the reply starts with reasoning unless the model closes it at once.
  if (whole.content.length) assert.ok(["thinking", "text"].includes(whole.content[0].type));
});

await check("messages.create stream: the documented event order, deltas == the final message == non-stream", async () => {
  const stream = await client.messages.create({ model: MODEL, max_tokens: 24, messages, temperature: 0,
                                                system: "Be brief.", stream: true });
  const events = [];
  for await (const ev of stream) events.push(ev);
  const names = events.map((e) => e.type).filter((t) => t !== "ping");
  assert.equal(names[0], "message_start");
  assert.equal(names.at(-2), "message_delta");
  assert.equal(names.at(-1), "message_stop");
  const blocks = [];
  let open = -1;
  for (const e of events.slice(1, -2)) {
    if (e.type === "ping") continue;
    if (e.type === "content_block_start") {
      assert.equal(open, -1, "a block opened inside another");
      assert.equal(e.index, blocks.length);
      open = e.index;
      blocks.push(structuredClone(e.content_block));
    } else if (e.type === "content_block_delta") {
      assert.equal(e.index, open);
      const b = blocks[open];
      if (e.delta.type === "text_delta") b.text += e.delta.text;
      else if (e.delta.type === "thinking_delta") b.thinking += e.delta.thinking;
      else if (e.delta.type === "input_json_delta") b.partial = (b.partial ?? "") + e.delta.partial_json;
      else assert.fail(`delta ${e.delta.type}`);
    } else if (e.type === "content_block_stop") {
      assert.equal(e.index, open);
      open = -1;
    } else {
      assert.fail(`event ${e.type}`);
    }
  }
  assert.equal(open, -1);
  const delta = events.at(-2);
  assert.equal(delta.delta.stop_reason, whole.stop_reason);
  assert.deepEqual(blocks.map((b) => b.text ?? b.thinking), whole.content.map((b) => b.text ?? b.thinking));
  assert.equal(delta.usage.output_tokens, whole.usage.output_tokens);
});

await check("messages.stream helper: finalMessage() and the text events agree", async () => {
  const s = client.messages.stream({ model: MODEL, max_tokens: 24, messages, temperature: 0, system: "Be brief." });
  let text = "";
  s.on("text", (t) => { text += t; });
  const final = await s.finalMessage();
  checkShape(final);
  assert.equal(text, final.content.filter((b) => b.type === "text").map((b) => b.text).join(""));
  assert.deepEqual(final.content, whole.content);
});

// thinking.budget_tokens is enforced: after that many tokens of reasoning the end tag is forced
// (each thinking_delta carries at least one token); without a budget some replies think longer.
await check("thinking.budget_tokens: at most that many reasoning tokens, then the answer", async () => {
  const thinkingDeltas = async (thinking) => {
    const stream = await client.messages.create({ model: MODEL, max_tokens: 48, messages, temperature: 1, stream: true,
                                                  ...(thinking ? { thinking } : {}) });
    let n = 0;
    for await (const e of stream)
      if (e.type === "content_block_delta" && e.delta.type === "thinking_delta") n++;
    return { n };
  };
  let longer = 0;
  for (let i = 0; i < 6; i++) {
    const b = await thinkingDeltas({ type: "enabled", budget_tokens: 4 });
    assert.ok(b.n <= 4, `${b.n} thinking deltas for a budget of 4`);
    if ((await thinkingDeltas(null)).n > 4) longer++;
  }
  assert.ok(longer > 0, "without the budget some replies think longer (else the check shows nothing)");
});

await check("messages.countTokens == the input usage of the same request", async () => {
  const c = await client.messages.countTokens({ model: MODEL, messages, system: "Be brief." });
  assert.equal(c.input_tokens, whole.usage.input_tokens + whole.usage.cache_read_input_tokens);
});

await check("tools, a tool_use / tool_result history, thinking enabled", async () => {
  const m = await client.messages.create({
    model: MODEL, max_tokens: 16, temperature: 0, tools, tool_choice: { type: "auto" },
    thinking: { type: "enabled", budget_tokens: 1024 },
    messages: [
      { role: "user", content: [{ type: "text", text: "Weather in Paris?" }] },
      { role: "assistant", content: [
        { type: "thinking", thinking: "Use the tool.", signature: "ignored" },
        { type: "tool_use", id: "toolu_01", name: "get_weather", input: { city: "Paris" } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_01", content: "sunny", is_error: false }] },
    ],
  });
  checkShape(m);
  for (const b of m.content.filter((b) => b.type === "tool_use")) {
    assert.match(b.id, /^toolu_/);
    assert.equal(typeof b.input, "object");
  }
});

await check("a forced tool call (tool_choice tool): a tool_use block, streamed as input_json_delta pieces", async () => {
  const req = { model: MODEL, max_tokens: 300, temperature: 0, tools, tool_choice: { type: "tool", name: "get_weather" },
                messages: [{ role: "user", content: "Weather in Paris?" }] };
  const m = await client.messages.create(req);
  checkShape(m);
  assert.equal(m.stop_reason, "tool_use");
  const uses = m.content.filter((b) => b.type === "tool_use");
  assert.ok(uses.length >= 1, JSON.stringify(m.content));
  assert.equal(uses[0].name, "get_weather");
  assert.equal(typeof uses[0].input.city, "string");  // the grammar keeps the arguments to the schema
  // Streamed: the SDK assembles the input_json_delta pieces into the same input.
  const s = client.messages.stream(req);
  let pieces = 0;
  s.on("inputJson", () => { pieces++; });
  const final = await s.finalMessage();
  assert.deepEqual(final.content.filter((b) => b.type === "tool_use").map((b) => [b.name, b.input]),
                   uses.map((b) => [b.name, b.input]));
  assert.ok(pieces >= 1);
});

await check("errors: the SDK's classes with our messages", async () => {
  await expectError(Anthropic.BadRequestError, 400, "image", () =>
    client.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: "user", content: [
      { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } }] }] }));
  await expectError(Anthropic.BadRequestError, 400, "max_tokens", () =>
    client.messages.create({ model: MODEL, messages }));
  await expectError(Anthropic.BadRequestError, 400, "always reasons", () =>
    client.messages.create({ model: MODEL, max_tokens: 8, messages, thinking: { type: "disabled" } }));
  await expectError(Anthropic.BadRequestError, 400, "redacted_thinking", () =>
    client.messages.create({ model: MODEL, max_tokens: 8, messages: [
      { role: "user", content: "Hi" }, { role: "assistant", content: [{ type: "redacted_thinking", data: "x" }] },
      { role: "user", content: "Again" }] }));
  await expectError(Anthropic.BadRequestError, 400, "top_logprobs", () =>
    client.messages.create({ model: MODEL, max_tokens: 8, messages, top_logprobs: 2 }));
  await expectError(Anthropic.NotFoundError, 404, "claude-nope", () =>
    client.messages.create({ model: "claude-nope", max_tokens: 8, messages }));
  const bad = new Anthropic({ baseURL, apiKey: "wrong", maxRetries: 0 });
  try {
    await bad.messages.create({ model: MODEL, max_tokens: 8, messages });
    assert.fail("a wrong key was accepted");
  } catch (e) {
    assert.ok(e instanceof Anthropic.AuthenticationError, `${e?.constructor?.name}: ${e?.message}`);
  }
});

// Refusals from every layer (the connection front, httplib's routing, the route) on both
// Anthropic paths: Anthropic's shape, so the SDK picks the class for the status and reads the
// type (e.type) and message from our body. The OpenAI route next door keeps OpenAI's shape.
async function expectShaped(cls, status, type, fn) {
  let err;
  try {
    await fn();
  } catch (e) {
    err = e;
  }
  assert.ok(err, `expected ${cls.name}`);
  assert.ok(err instanceof cls, `expected ${cls.name}, got ${err?.constructor?.name}: ${err?.message}`);
  assert.equal(err.status, status);
  assert.equal(err.error?.type, "error", JSON.stringify(err.error));
  assert.equal(err.error?.error?.type, type, JSON.stringify(err.error));
  assert.equal(err.type, type);
  assert.deepEqual(Object.keys(err.error).sort(), ["error", "type"]);
  assert.ok(err.error.error.message.length > 0);
}

await check("errors on /v1/messages*: Anthropic's shape from every layer, the SDK's class per status", async () => {
  const bad = new Anthropic({ baseURL, apiKey: "wrong", maxRetries: 0 });
  // 401 from the front, before the body is read (no key at all: anthropic_errors_test.cpp; the
  // SDK refuses to send a request without one).
  await expectShaped(Anthropic.AuthenticationError, 401, "authentication_error", () =>
    bad.messages.create({ model: MODEL, max_tokens: 8, messages }));
  await expectShaped(Anthropic.AuthenticationError, 401, "authentication_error", () =>
    bad.messages.countTokens({ model: MODEL, messages }));
  // 404: an unknown model (the route), an unknown path under /v1/messages (httplib).
  await expectShaped(Anthropic.NotFoundError, 404, "not_found_error", () =>
    client.messages.countTokens({ model: "claude-nope", messages }));
  await expectShaped(Anthropic.NotFoundError, 404, "not_found_error", () =>
    client.post("/v1/messages/nope", { body: {} }));
  // 405: a known path with the wrong method (httplib); no class of its own, so APIError.
  await expectShaped(Anthropic.APIError, 405, "invalid_request_error", () => client.get("/v1/messages"));
  await expectShaped(Anthropic.APIError, 405, "invalid_request_error", () => client.get("/v1/messages/count_tokens"));
  // 400 from the route: a field count_tokens does not take.
  await expectShaped(Anthropic.BadRequestError, 400, "invalid_request_error", () =>
    client.messages.countTokens({ model: MODEL, messages, max_tokens: 5 }));
  // 413 from the front: a body over --max-body-bytes (8 MiB by default), refused by its length.
  const huge = [{ role: "user", content: "x".repeat(9 << 20) }];
  await expectShaped(Anthropic.ContentTooLargeError, 413, "request_too_large", () =>
    client.messages.create({ model: MODEL, max_tokens: 4, messages: huge }));
  await expectShaped(Anthropic.ContentTooLargeError, 413, "request_too_large", () =>
    client.messages.countTokens({ model: MODEL, messages: huge }));
  // 431 from the front: a request head over its limit.
  const padded = new Anthropic({ baseURL, apiKey: process.env.MMX_API_KEY, maxRetries: 0,
                                 defaultHeaders: { "x-pad": "a".repeat(64 << 10) } });
  await expectShaped(Anthropic.RequestHeaderFieldsTooLargeError, 431, "invalid_request_error", () =>
    padded.messages.countTokens({ model: MODEL, messages }));
  // The OpenAI route: OpenAI's shape (no top-level type; error.param and error.code).
  let err;
  try {
    await bad.post("/v1/chat/completions", { body: { model: MODEL, messages } });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof Anthropic.AuthenticationError, `${err?.constructor?.name}: ${err?.message}`);
  assert.deepEqual(Object.keys(err.error), ["error"], JSON.stringify(err.error));
  assert.ok("param" in err.error.error && "code" in err.error.error, JSON.stringify(err.error));
});

await check("still serving after the errors", async () => {
  checkShape(await client.messages.create({ model: MODEL, max_tokens: 4, messages }));
});

finish();
