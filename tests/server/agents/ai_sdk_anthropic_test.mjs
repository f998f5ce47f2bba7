// The AI SDK (`ai` streamText) with its Anthropic provider (@ai-sdk/anthropic, which adds
// eager_input_streaming: true to every tool) against `mmx serve`'s /v1/messages: a forced tool
// call streams as tool-input-delta parts and the step finishes with finishReason tool-calls.
//   node ai_sdk_anthropic_test.mjs   (MMX_BASE_URL, MMX_API_KEY, MMX_NPM_AGENTS in the environment)
import assert from "node:assert/strict";
import { createRequire } from "node:module";
const require = createRequire(process.env.MMX_NPM_AGENTS + "/package.json");
const { streamText, tool, jsonSchema } = require("ai");
const { createAnthropic } = require("@ai-sdk/anthropic");

const anthropic = createAnthropic({ baseURL: process.env.MMX_BASE_URL, apiKey: process.env.MMX_API_KEY });
const r = streamText({
  model: anthropic("tiny-m2"), prompt: "What is the weather in Paris?", maxOutputTokens: 200, maxRetries: 0,
  tools: { get_weather: tool({ description: "Weather for a city",
    inputSchema: jsonSchema({ type: "object", properties: { city: { type: "string" } }, required: ["city"] }) }) },
  toolChoice: { type: "tool", toolName: "get_weather" } });
const parts = [];
for await (const p of r.fullStream) parts.push(p);
const kinds = parts.map((p) => p.type);
const errors = parts.filter((p) => p.type === "error").map((p) => String(p.error?.message ?? p.error));
assert.deepEqual(errors, [], "stream errors");
const deltas = parts.filter((p) => p.type === "tool-input-delta");
assert.ok(kinds.includes("tool-input-start"), kinds.join(","));
assert.ok(deltas.length >= 1, "no tool-input-delta: " + kinds.join(","));
const call = parts.find((p) => p.type === "tool-call");
assert.ok(call, "no tool-call: " + kinds.join(","));
assert.equal(call.toolName, "get_weather");
assert.equal(typeof call.input.city, "string");
assert.deepEqual(JSON.parse(deltas.map((d) => d.delta).join("")), call.input, "the deltas join to the input");
const finish = parts.find((p) => p.type === "finish");
assert.equal(finish?.finishReason, "tool-calls", JSON.stringify(finish));
console.log(`ok   streamText: ${deltas.length} tool-input-delta parts, tool-call ${JSON.stringify(call.input).slice(0, 80)}, finish ${finish.finishReason}`);
