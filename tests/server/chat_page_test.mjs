// The chat page (GET /) in headless Chromium (npm puppeteer-core) against `mmx serve` on a tiny
// random-weight M2 checkpoint started with --api-key (chat_page_test.sh starts it).
// Checks: the page and its assets are served without the key while the API needs it; the page
// asks for the key, then shows the model; a greedy reply streams into the page incrementally and
// its final text equals a non-streamed request with the very body the page sent; the tokens/s
// readout agrees with usage; the second turn carries the first; Stop aborts a reply; tool calls
// whose arguments arrive in fragments (interleaved across two calls) are accumulated by index
// and rendered. Writes a screenshot to $MMX_SCREENSHOT.
import assert from "node:assert/strict";
import { check, finish, require } from "./harness.mjs";

const puppeteer = require("puppeteer-core");
const BASE = process.env.MMX_BASE;
const KEY = process.env.MMX_API_KEY;
const MODEL = "tiny-m2";


await check("GET /, /chat.js, /chat.css are served without the key; the API needs it", async () => {
  for (const [p, type] of [["/", "text/html"], ["/chat.js", "text/javascript"], ["/chat.css", "text/css"]]) {
    const r = await fetch(BASE + p);
    assert.equal(r.status, 200, p);
    assert.ok(r.headers.get("content-type").startsWith(type), `${p}: ${r.headers.get("content-type")}`);
    assert.ok((await r.text()).length > 100, p);
  }
  assert.equal((await fetch(BASE + "/v1/models")).status, 401);
  assert.equal((await fetch(BASE + "/", { method: "POST", headers: { Authorization: `Bearer ${KEY}` } })).status, 405);
});

const browser = await puppeteer.launch({
  executablePath: process.env.MMX_CHROMIUM,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const page = await browser.newPage();
await page.setViewport({ width: 1200, height: 820 });
const pageErrors = [];
page.on("pageerror", (e) => pageErrors.push(String(e)));
page.on("console", (m) => {
  // The page's first /v1/models before the key is typed is a 401 by design.
  if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) pageErrors.push(m.text());
});
const sentBodies = [];  // every /v1/chat/completions body the page sent
page.on("request", (r) => {
  if (r.url().endsWith("/v1/chat/completions")) sentBodies.push(JSON.parse(r.postData()));
});

const setField = (sel, value) =>
  page.$eval(sel, (el, v) => {
    el.value = v;
    el.dispatchEvent(new Event("change"));
  }, value);
const lastReply = () =>
  page.evaluate(() => {
    const a = [...document.querySelectorAll("article.assistant")].pop();
    return {
      state: a.dataset.state,
      content: a.querySelector(".content").textContent,
      reasoning: a.querySelector(".reasoning-text").textContent,
      reasoningShown: !a.querySelector(".reasoning").hidden,
      stats: a.querySelector(".stats").textContent,
      calls: [...a.querySelectorAll(".tool-call")].map((c) => ({
        name: c.querySelector(".tool-name code").textContent,
        args: c.querySelector(".tool-args").textContent,
      })),
    };
  });
const nReplies = (state) => page.$$eval(`article.assistant[data-state="${state}"]`, (a) => a.length);
async function sendMessage(text) {
  await page.type("#input", text);
  await page.keyboard.press("Enter");
}

await check("the page loads, asks for the key, then shows the model", async () => {
  await page.goto(BASE + "/", { waitUntil: "load" });
  await page.waitForFunction(() => /API key/.test(document.getElementById("status").textContent), { timeout: 10000 });
  const unlabelled = await page.$$eval("input, textarea", (els) => els.filter((e) => e.labels.length === 0).map((e) => e.id));
  assert.deepEqual(unlabelled, [], "every field has a label");
  await setField("#api-key", KEY);
  await page.waitForFunction((m) => document.getElementById("model").textContent === m, { timeout: 10000 }, MODEL);
  assert.equal(await page.$eval("#status", (e) => e.textContent), "");
});

await setField("#temperature", "0");
await setField("#top-p", "1");
await setField("#max-tokens", "160");
await setField("#seed", "11");
await setField("#system", "You are a concise assistant.");

let first;
await check("a greedy reply streams in incrementally and equals the non-streamed reply", async () => {
  // Every piece of text the page adds to the reply (one mutation record each), and the length
  // shown after each observer callback (how many separate moments the reply grew at: at least one
  // per network read, which depends on timing, so it is reported, not required).
  await page.evaluate(() => {
    window.__appends = [];
    window.__lengths = [];
    new MutationObserver((records) => {
      for (const r of records)
        for (const n of r.addedNodes) {
          const where = r.target.classList?.contains("content") ? "content" : r.target.classList?.contains("reasoning-text") ? "reasoning" : null;
          if (n.nodeType === Node.TEXT_NODE && where && r.target.closest("article.assistant")) window.__appends.push({ where, text: n.data });
        }
      const a = [...document.querySelectorAll("article.assistant")].pop();
      if (a) window.__lengths.push(a.querySelector(".content").textContent.length + a.querySelector(".reasoning-text").textContent.length);
    }).observe(document.getElementById("log"), { childList: true, subtree: true, characterData: true });
  });
  await sendMessage("Hello! What can you do?");
  await page.waitForSelector('article.assistant[data-state="done"]', { timeout: 60000 });
  first = await lastReply();
  const appends = await page.evaluate(() => window.__appends);
  const lengths = await page.evaluate(() => window.__lengths);
  const joined = (where) => appends.filter((x) => x.where === where).map((x) => x.text).join("");
  assert.ok(appends.length >= 2, `the reply was rendered in at least two appends (${appends.length})`);
  assert.equal(joined("content"), first.content, "the content appends add up to the content shown");
  assert.equal(joined("reasoning"), first.reasoning, "the reasoning appends add up to the reasoning shown");
  const growing = new Set(lengths.filter((n) => n > 0));
  console.log(`     ${appends.length} appends; the shown text grew at ${growing.size} moments (${first.stats})`);
  assert.ok(first.content.length + first.reasoning.length > 0, "some text arrived");

  const sent = sentBodies[0];
  assert.equal(sent.stream, true);
  assert.deepEqual(sent.stream_options, { include_usage: true });
  assert.equal(sent.model, MODEL);
  assert.equal(sent.temperature, 0);
  assert.equal(sent.seed, 11);
  assert.equal(sent.max_tokens, 160);
  assert.deepEqual(sent.messages, [
    { role: "system", content: "You are a concise assistant." },
    { role: "user", content: "Hello! What can you do?" },
  ]);
  const { stream, stream_options, ...whole } = sent;
  const r = await fetch(BASE + "/v1/chat/completions", {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${KEY}` },
    body: JSON.stringify(whole),
  });
  assert.equal(r.status, 200);
  const ref = await r.json();
  const msg = ref.choices[0].message;
  assert.equal(first.content, msg.content ?? "");
  assert.equal(first.reasoning, msg.reasoning_content ?? "");
  assert.equal(first.reasoningShown, (msg.reasoning_content ?? "") !== "");
  assert.deepEqual(first.calls.map((c) => c.name), (msg.tool_calls ?? []).map((c) => c.function.name));

  const m = first.stats.match(/^(\d+) tokens · ([\d.]+) tok\/s · first token ([\d.]+) s/);
  assert.ok(m, `stats readout: "${first.stats}"`);
  assert.equal(Number(m[1]), ref.usage.completion_tokens);
  assert.ok(Number(m[2]) > 0, "tokens/s > 0");
});

await check("the second turn sends the first one back", async () => {
  await sendMessage("Tell me more.");
  await page.waitForFunction(() => document.querySelectorAll('article.assistant[data-state="done"]').length === 2, { timeout: 60000 });
  const sent = sentBodies[1];
  assert.equal(sent.messages.length, 4);
  const asst = sent.messages[2];
  assert.equal(asst.role, "assistant");
  assert.equal(asst.content, first.content);
  assert.equal(asst.reasoning_content ?? "", first.reasoning);
  assert.deepEqual(sent.messages[3], { role: "user", content: "Tell me more." });
});

await check("Stop aborts a reply in flight; the server stays up", async () => {
  await setField("#max-tokens", "3000");
  // Clicked from inside the page as soon as the reply shows text: the tiny model writes
  // hundreds of tokens a second, faster than a round trip from this script.
  await page.evaluate(() => {
    window.__stopClick = null;
    const obs = new MutationObserver(() => {
      const a = [...document.querySelectorAll("article.assistant")].pop();
      if (!a || a.dataset.state !== "streaming" || a.textContent.trim() === "assistant") return;
      const stop = document.getElementById("stop");
      window.__stopClick = { state: a.dataset.state, stopEnabled: !stop.disabled };
      stop.click();
      obs.disconnect();
    });
    obs.observe(document.getElementById("log"), { childList: true, subtree: true, characterData: true });
  });
  await sendMessage("Write a long story.");
  await page.waitForFunction(() => window.__stopClick !== null, { timeout: 60000 });
  assert.deepEqual(await page.evaluate(() => window.__stopClick), { state: "streaming", stopEnabled: true });
  await page.waitForSelector('article.assistant[data-state="stopped"]', { timeout: 10000 });
  const r = await lastReply();
  assert.ok(r.stats.includes("stopped"), r.stats);
  assert.equal(await page.$eval("#stop", (b) => b.disabled), true);
  assert.equal(await page.$eval("#send", (b) => b.disabled), false);
  assert.equal((await fetch(BASE + "/health")).status, 200);
});

await check("a refused request shows the server's message naming the field, and is not kept", async () => {
  await setField("#max-tokens", "0");
  const before = sentBodies.length;
  await sendMessage("This one is refused.");
  await page.waitForSelector('article.assistant[data-state="error"]', { timeout: 10000 });
  const r = await lastReply();
  assert.match(r.stats, /^400: .*max_tokens/, r.stats);
  assert.match(r.stats, /not kept/);
  await setField("#max-tokens", "8");
  await sendMessage("And this one is not.");
  await page.waitForFunction(() => document.querySelectorAll('article.assistant[data-state="done"]').length === 3, { timeout: 60000 });
  const sent = sentBodies[before + 1];
  assert.ok(!sent.messages.some((m) => m.content === "This one is refused."), "the refused turn is not sent again");
  assert.equal(sent.messages[sent.messages.length - 1].content, "And this one is not.");
});

// Scripted answers (request interception) for what a random tiny model will not write: tool
// calls whose arguments come in fragments, two calls interleaved by index.
const sse = (chunks) => chunks.map((c) => `data: ${typeof c === "string" ? c : JSON.stringify(c)}\n\n`).join("");
const ch = (delta, finish = null) => ({ id: "x", object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finish }] });
const fragmentsA = ['{"city": "Pa', 'ris", "unit', '": "celsius"}'];
const argsB = '{"city": "Tokyo", "unit": "celsius"}';
const scripted = sse([
  ch({ role: "assistant", content: "" }),
  ch({ reasoning_content: "The user asks about the weather in two cities, " }),
  ch({ reasoning_content: "so I call get_weather twice." }),
  ch({ content: "Let me look that up for both cities." }),
  ch({ tool_calls: [{ index: 0, id: "call_a", type: "function", function: { name: "get_weather", arguments: fragmentsA[0] } }] }),
  ch({ tool_calls: [{ index: 1, id: "call_b", type: "function", function: { name: "get_weather", arguments: "" } }] }),
  ch({ tool_calls: [{ index: 0, function: { arguments: fragmentsA[1] } }] }),
  ch({ tool_calls: [{ index: 1, function: { arguments: argsB } }] }),
  ch({ tool_calls: [{ index: 0, function: { arguments: fragmentsA[2] } }] }),
  ch({}, "tool_calls"),
  { id: "x", object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: 30, completion_tokens: 57, total_tokens: 87 } },
  "[DONE]",
]);

await check("tool calls with fragmented, interleaved arguments are accumulated by index", async () => {
  await page.click("#new-chat");
  assert.equal(await page.$$eval("article.msg", (a) => a.length), 0);
  await page.setRequestInterception(true);
  page.on("request", (r) => {
    if (!r.isInterceptResolutionHandled() && r.url().endsWith("/v1/chat/completions"))
      return r.respond({ status: 200, contentType: "text/event-stream", body: scripted });
    if (!r.isInterceptResolutionHandled()) r.continue();
  });
  await sendMessage("What's the weather in Paris and Tokyo?");
  await page.waitForSelector('article.assistant[data-state="done"]', { timeout: 10000 });
  const r = await lastReply();
  assert.equal(r.reasoning, "The user asks about the weather in two cities, so I call get_weather twice.");
  assert.equal(r.content, "Let me look that up for both cities.");
  const pretty = (s) => JSON.stringify(JSON.parse(s), null, 2);
  assert.deepEqual(r.calls, [
    { name: "get_weather", args: pretty(fragmentsA.join("")) },
    { name: "get_weather", args: pretty(argsB) },
  ]);
  assert.match(r.stats, /^57 tokens · [\d.]+ tok\/s · first token [\d.]+ s · tool_calls$/);

  await sendMessage("Thanks.");
  await page.waitForFunction(() => document.querySelectorAll('article.assistant[data-state="done"]').length === 2, { timeout: 10000 });
  const sent = sentBodies[sentBodies.length - 1];
  assert.equal(sent.messages.length, 4, "system, user, assistant, user: New chat cleared the earlier turns");
  assert.deepEqual(sent.messages[2].tool_calls, [
    { id: "call_a", type: "function", function: { name: "get_weather", arguments: fragmentsA.join("") } },
    { id: "call_b", type: "function", function: { name: "get_weather", arguments: argsB } },
  ]);
  // Shown for the screenshot: the first scripted turn only.
  await page.evaluate(() => [...document.querySelectorAll("article.msg")].slice(2).forEach((a) => a.remove()));
});

await check("no errors on the page", async () => {
  assert.deepEqual(pageErrors, []);
});

if (process.env.MMX_SCREENSHOT) await page.screenshot({ path: process.env.MMX_SCREENSHOT });
await browser.close();
finish();
