// The chat page: talks to this server's /v1/chat/completions with stream: true.
// One way data flows: the form -> history (the OpenAI messages array) -> a streamed request ->
// SSE events -> one Reply that accumulates deltas and renders them -> back into history.
// No framework, no build step, nothing fetched but this server's own routes.
'use strict';

const $ = (id) => document.getElementById(id);
const els = {
  log: $('log'), empty: $('empty'), model: $('model'), status: $('status'), form: $('composer'),
  input: $('input'), send: $('send'), stop: $('stop'), newChat: $('new-chat'), system: $('system'),
  temperature: $('temperature'), topP: $('top-p'), maxTokens: $('max-tokens'), seed: $('seed'), apiKey: $('api-key'),
};

let history = [];       // [{role, content, reasoning_content?, tool_calls?}], the system prompt not included
let modelName = null;   // from /v1/models
let controller = null;  // AbortController of the reply in flight
let conversation = 0;   // bumped by "New chat", so a reply cut off by it is not kept

// ---- settings: kept in localStorage so a reload keeps them ----

const SETTINGS = ['system', 'temperature', 'topP', 'maxTokens', 'seed', 'apiKey'];
for (const k of SETTINGS) {
  const saved = localStorage.getItem('mmx.' + k);
  if (saved !== null) els[k].value = saved;
  els[k].addEventListener('change', () => localStorage.setItem('mmx.' + k, els[k].value));
}

function headers() {
  const h = { 'Content-Type': 'application/json' };
  const key = els.apiKey.value.trim();
  if (key) h.Authorization = 'Bearer ' + key;
  return h;
}

function setStatus(text, isError = false) {
  els.status.textContent = text;
  els.status.classList.toggle('error', isError);
}

// The error message of a non-2xx answer (OpenAI's {"error": {"message"}} shape, else the text).
async function errorText(res) {
  const body = await res.text();
  try {
    return JSON.parse(body).error.message;
  } catch {
    return body || res.statusText;
  }
}

async function loadModel() {
  try {
    const res = await fetch('/v1/models', { headers: headers() });
    if (!res.ok) {
      els.model.textContent = 'model: ?';
      setStatus(res.status === 401 ? 'This server needs an API key (Settings)' : await errorText(res), true);
      return;
    }
    modelName = (await res.json()).data[0].id;
    els.model.textContent = modelName;
    setStatus('');
  } catch (e) {
    setStatus('Cannot reach the server: ' + e.message, true);
  }
}
els.apiKey.addEventListener('change', loadModel);

// ---- rendering ----

function scrollToEnd() {
  els.log.scrollTop = els.log.scrollHeight;
}

function addUserMessage(text) {
  els.empty.hidden = true;
  const art = document.createElement('article');
  art.className = 'msg user';
  const role = document.createElement('div');
  role.className = 'role';
  role.textContent = 'you';
  const body = document.createElement('div');
  body.className = 'content text';
  body.textContent = text;
  art.append(role, body);
  els.log.append(art);
  scrollToEnd();
}

// One assistant reply: accumulates the stream's deltas and renders them as they come.
class Reply {
  constructor() {
    els.empty.hidden = true;
    this.el = document.getElementById('assistant-template').content.firstElementChild.cloneNode(true);
    this.el.dataset.state = 'streaming';
    this.reasoningBox = this.el.querySelector('.reasoning');
    this.reasoningEl = this.el.querySelector('.reasoning-text');
    this.contentEl = this.el.querySelector('.content');
    this.callsEl = this.el.querySelector('.tool-calls');
    this.statsEl = this.el.querySelector('.stats');
    this.content = '';
    this.reasoning = '';
    this.calls = [];  // by delta.tool_calls[i].index: {id, name, arguments, el}
    this.usage = null;
    this.finishReason = null;
    this.tSend = performance.now();
    this.tFirst = null;
    els.log.append(this.el);
  }

  // delta: the OpenAI chunk's choices[0].delta. Text is appended as new text nodes, so the DOM
  // grows with the stream and nothing already shown is rewritten.
  apply(delta) {
    if (this.tFirst === null && (delta.content || delta.reasoning_content || delta.tool_calls)) this.tFirst = performance.now();
    if (delta.reasoning_content) {
      if (this.reasoningBox.hidden) {
        this.reasoningBox.hidden = false;
        this.reasoningBox.open = true;  // open while it streams; closed once the answer starts
      }
      this.reasoning += delta.reasoning_content;
      this.reasoningEl.append(delta.reasoning_content);
      this.reasoningEl.scrollTop = this.reasoningEl.scrollHeight;  // follow it while it streams
    }
    if (delta.content) {
      if (!this.content && this.reasoning) this.reasoningBox.open = false;
      this.content += delta.content;
      this.contentEl.append(delta.content);
    }
    for (const tc of delta.tool_calls || []) this.applyToolCall(tc);
    scrollToEnd();
  }

  // Arguments may come whole or as fragments across chunks: accumulate by index.
  applyToolCall(tc) {
    const i = tc.index ?? this.calls.length;
    let c = this.calls[i];
    if (!c) {
      c = this.calls[i] = { id: '', name: '', arguments: '' };
      c.el = document.createElement('div');
      c.el.className = 'tool-call';
      const head = document.createElement('div');
      head.className = 'tool-name';
      c.nameEl = document.createElement('code');
      head.append('tool call ', c.nameEl);
      c.argsEl = document.createElement('pre');
      c.argsEl.className = 'tool-args';
      c.el.append(head, c.argsEl);
      this.callsEl.append(c.el);
    }
    if (tc.id) c.id = tc.id;
    const f = tc.function || {};
    if (f.name && !c.name) {
      c.name = f.name;
      c.nameEl.textContent = f.name;
    }
    if (f.arguments) {
      c.arguments += f.arguments;
      c.argsEl.textContent = prettyJson(c.arguments);
    }
  }

  finish(state, message) {
    this.el.dataset.state = state;
    const parts = [];
    if (this.usage) {
      const n = this.usage.completion_tokens;
      const seconds = (performance.now() - this.tSend) / 1000;
      parts.push(`${n} tokens`, `${(n / seconds).toFixed(1)} tok/s`);
      if (this.tFirst !== null) parts.push(`first token ${((this.tFirst - this.tSend) / 1000).toFixed(2)} s`);
    }
    if (this.finishReason && this.finishReason !== 'stop') parts.push(this.finishReason);
    if (state === 'stopped') parts.push('stopped');
    if (message) parts.push(message);
    this.statsEl.textContent = parts.join(' · ');
    this.statsEl.classList.toggle('error', state === 'error');
    if (this.content && this.reasoning) this.reasoningBox.open = false;
  }

  // The assistant turn as it goes back into the next request.
  message() {
    const m = { role: 'assistant', content: this.content };
    if (this.reasoning) m.reasoning_content = this.reasoning;
    const calls = this.calls.filter((c) => c && c.name);
    if (calls.length)
      m.tool_calls = calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments || '{}' } }));
    return m;
  }
}

function prettyJson(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;  // still arriving, or not JSON: shown as it is
  }
}

// ---- the request ----

function requestBody() {
  const messages = [];
  const system = els.system.value.trim();
  if (system) messages.push({ role: 'system', content: system });
  messages.push(...history);
  const body = { messages, stream: true, stream_options: { include_usage: true } };
  if (modelName) body.model = modelName;
  const num = (el) => (el.value.trim() === '' ? undefined : Number(el.value));
  body.temperature = num(els.temperature);
  body.top_p = num(els.topP);
  body.max_tokens = num(els.maxTokens);
  body.seed = num(els.seed);
  return body;
}

// Reads the SSE stream into `reply`; returns when [DONE] arrives or the stream ends.
async function readStream(res, reply) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data:')) continue;  // ": ping" comments and the like
        const data = line.slice(5).trim();
        if (data === '[DONE]') return;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message || 'error while generating');
        if (chunk.usage) reply.usage = chunk.usage;
        const choice = chunk.choices && chunk.choices[0];
        if (!choice) continue;
        if (choice.delta) reply.apply(choice.delta);
        if (choice.finish_reason) reply.finishReason = choice.finish_reason;
      }
    }
  }
}

async function send(text) {
  const mine = conversation;
  history.push({ role: 'user', content: text });
  addUserMessage(text);
  const reply = new Reply();
  controller = new AbortController();
  setBusy(true);
  try {
    const res = await fetch('/v1/chat/completions', {
      method: 'POST', headers: headers(), body: JSON.stringify(requestBody()), signal: controller.signal,
    });
    if (!res.ok) throw new Error(`${res.status}: ${await errorText(res)}`);
    await readStream(res, reply);
    reply.finish('done');
  } catch (e) {
    if (e.name === 'AbortError') reply.finish('stopped');
    else reply.finish('error', e.message);
  } finally {
    controller = null;
    setBusy(false);
  }
  // What was shown stays in the conversation, stopped or not; a failed turn with nothing is dropped.
  if (mine !== conversation) return;
  if (reply.content || reply.reasoning || reply.calls.length) {
    history.push(reply.message());
  } else {
    history.pop();
    reply.statsEl.textContent += ' (this turn is not kept in the conversation)';
  }
}

function setBusy(busy) {
  els.send.disabled = busy;
  els.stop.disabled = !busy;
  if (!busy) els.input.focus();
}

els.form.addEventListener('submit', (e) => {
  e.preventDefault();
  const text = els.input.value.trim();
  if (!text || controller) return;
  els.input.value = '';
  send(text);
});
els.input.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    els.form.requestSubmit();
  }
});
els.stop.addEventListener('click', () => controller && controller.abort());
els.newChat.addEventListener('click', () => {
  if (controller) controller.abort();
  conversation++;
  history = [];
  for (const m of els.log.querySelectorAll('.msg')) m.remove();
  els.empty.hidden = false;
  els.input.focus();
});

loadModel();
els.input.focus();
