// The OpenAI Agents SDK (@openai/agents, its default Responses model) and the AI SDK
// (@ai-sdk/openai's default openai(model), the Responses API) against `mmx serve` on a random
// long-context M2: a tool agent that runs to the end, generateText / streamText, a forced tool
// call and its result sent back (which, with the SDK's default store, names the first response's
// items by item_reference). MMX_BASE_URL, MMX_API_KEY, MMX_NPM_AGENTS and MMX_PART (agents |
// aisdk) come from responses_clients_test.sh.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(process.env.MMX_NPM_AGENTS + '/node_modules/');
const { Agent, run, tool, setDefaultOpenAIClient, setTracingDisabled } = require('@openai/agents');
const OpenAI = require('openai').default;
const { generateText, streamText, tool: aiTool, stepCountIs } = require('ai');
const { createOpenAI } = require('@ai-sdk/openai');
const { z } = require('zod');

const baseURL = process.env.MMX_BASE_URL, apiKey = process.env.MMX_API_KEY;
let failures = 0;
async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e.stack || e}`);
  }
}

const part = process.env.MMX_PART;  // "agents" | "aisdk"

// ---- the Agents SDK ----
// (A server with the minimax_m2_append_think parser: the random model's words are a message. The
// SDK runs a turn again until one has a message, and with minimax_m2 a random model only reasons.)
setTracingDisabled(true);
setDefaultOpenAIClient(new OpenAI({ baseURL, apiKey, maxRetries: 0 }));
for (const stream of part === 'agents' ? [false, true] : []) {
  await check(`agents: a tool agent runs to the end (stream: ${stream})`, async () => {
    const calls = [];
    const weather = tool({
      name: 'get_weather', description: 'The weather of a city', parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => { calls.push(city); return `sunny in ${city}`; },
    });
    // toolChoice names the tool: a call forced by constrained decoding (the random model would
    // not call it otherwise); the SDK resets it to auto after the call, so the next turn answers.
    const agent = new Agent({ name: 'weather', instructions: 'Answer briefly.', model: 'tiny', tools: [weather],
                              modelSettings: { toolChoice: 'get_weather' } });
    const r = await run(agent, 'What is the weather in Paris?', { stream, maxTurns: 4 });
    if (stream) {
      let n = 0;
      for await (const _ of r) n++;
      await r.completed;
      assert.ok(n > 0, 'no stream events');
    }
    const seen = JSON.stringify(r.newItems.map((i) => [i.type, i.rawItem.arguments ?? i.rawItem.output ?? null]));
    assert.equal(calls.length, 1, `the tool ran ${calls.length} times: ${seen}`);
    assert.equal(typeof calls[0], 'string');
    const types = r.newItems.map((i) => i.type);
    assert.ok(types.includes('tool_call_item') && types.includes('tool_call_output_item'), types.join(','));
    assert.equal(typeof r.finalOutput, 'string', `finalOutput: ${r.finalOutput}`);
    assert.equal(r.rawResponses.length, 2, 'a tool turn and an answer turn');
    assert.ok(r.rawResponses[0].usage.inputTokens > 0);
  });
}

// ---- the AI SDK ----
if (part !== 'aisdk') process.exit(failures ? 1 : 0);
const model = createOpenAI({ baseURL, apiKey })('tiny');
await check('ai-sdk: generateText', async () => {
  const r = await generateText({ model, prompt: 'Say hi.', maxRetries: 0 });
  assert.equal(typeof r.text, 'string');
  assert.ok(r.usage.inputTokens > 0 && r.usage.outputTokens > 0, JSON.stringify(r.usage));
  assert.ok(['stop', 'length'].includes(r.finishReason), r.finishReason);
  assert.match(r.response.id, /^resp_/);
});
await check('ai-sdk: streamText (reasoning summary asked: the random model only reasons)', async () => {
  const r = streamText({ model, prompt: 'Say hi.', maxRetries: 0, onError: ({ error }) => { throw error; },
                         providerOptions: { openai: { forceReasoning: true, reasoningSummary: 'auto' } } });
  let text = '', reasoning = '', n = 0;
  for await (const part of r.fullStream) {
    if (part.type === 'error') throw part.error;
    if (part.type === 'text-delta' || part.type === 'reasoning-delta') n++;
    if (part.type === 'text-delta') text += part.text;
    if (part.type === 'reasoning-delta') reasoning += part.text;
  }
  assert.equal(text, await r.text);
  assert.ok(n > 1, `${n} deltas streamed`);
  assert.equal(reasoning, await r.reasoningText);
  const u = await r.usage;
  assert.ok(u.inputTokens > 0 && u.outputTokens > 0, JSON.stringify(u));
});
const weatherTool = (calls) => aiTool({
  description: 'The weather of a city', inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => { calls.push(city); return `sunny in ${city}`; },
});
await check('ai-sdk: a forced tool call, its result sent back (two steps)', async () => {
  const calls = [];
  const r = await generateText({
    model, prompt: 'Weather in Paris?', maxRetries: 0, tools: { get_weather: weatherTool(calls) },
    toolChoice: { type: 'tool', toolName: 'get_weather' }, stopWhen: stepCountIs(2),
    prepareStep: ({ stepNumber }) => (stepNumber > 0 ? { toolChoice: 'none' } : {}),
  });
  assert.equal(r.steps.length, 2, `steps: ${r.steps.length}`);
  const first = r.steps[0];
  assert.equal(first.toolCalls.length, 1);
  assert.equal(first.toolCalls[0].toolName, 'get_weather');
  assert.equal(typeof first.toolCalls[0].input.city, 'string');
  assert.equal(calls.length, 1);
  assert.equal(first.toolResults[0].output, `sunny in ${calls[0]}`);
  assert.equal(typeof r.text, 'string');
});
await check('ai-sdk: streamText with a forced tool call', async () => {
  const calls = [];
  const r = streamText({
    model, prompt: 'Weather in Paris?', maxRetries: 0, tools: { get_weather: weatherTool(calls) },
    toolChoice: { type: 'tool', toolName: 'get_weather' }, onError: ({ error }) => { throw error; },
  });
  const seen = [];
  for await (const part of r.fullStream) {
    if (part.type === 'error') throw part.error;
    seen.push(part.type);
  }
  assert.ok(seen.includes('tool-input-delta'), seen.join(','));
  const tc = await r.toolCalls;
  assert.equal(tc.length, 1);
  assert.equal(tc[0].toolName, 'get_weather');
  assert.equal(calls.length, 1);
});

process.exit(failures ? 1 : 0);
