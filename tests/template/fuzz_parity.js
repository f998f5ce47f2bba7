// Differential fuzzing of our Jinja interpreter against @huggingface/jinja (a dev tool, not run by
// ctest): random small templates over a fixed context are rendered by both (render_batch for our
// side) and any difference in output, or in error-vs-no-error, is printed.
//
// usage: node fuzz_parity.js --npm BUILD/npm --driver BUILD/tests/template/template_render_batch
//                            [--n 3000] [--seed 1]
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const { spawnSync } = require("child_process");

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].slice(2)] = process.argv[i + 1];
const { Template } = require(path.resolve(args.npm, "node_modules/@huggingface/jinja"));
const N = Number(args.n || 3000);
let seed = Number(args.seed || 1);
const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const pick = (a) => a[Math.floor(rnd() * a.length)];

const ctx = {
  s: "Hello, World! ünï 東京 🙂", e: "", n: 3, f: 2.5, z: 0, neg: -7, t: true, no: false, nul: null,
  l: [3, 1, 2], ls: ["b", "A", "c"], ll: [[1, 2], [3, 4]], d: { b: 1, a: "x", "2": [1], c: null },
  objs: [{ r: "user", c: "hi", v: 2 }, { r: "assistant", c: "yo", v: 0 }, { r: "user", c: "", v: 1.5 }],
  ws: "  \n\t padded \n ", big: 1e21, small: 1e-7, fl: 0.1, one: 1.0,
};
const atoms = ["s", "e", "n", "f", "z", "neg", "t", "no", "nul", "undef", "l", "ls", "ll", "d", "objs", "ws", "big",
  "small", "fl", "one", "'abc'", "'a b  c'", "\"q\\\"x\"", "1", "0", "-2", "2.0", "0.5", "[]", "[1, 'a']", "{}",
  "{'k': 1}", "none", "true", "(1, 2)", "d.b", "d['2']", "objs[0]", "l[-1]", "s[1:4]", "l[::-1]", "s[::2]", "d.c", "loop"];
const filters = ["length", "upper", "lower", "trim", "tojson", "string", "first", "last", "list", "sort", "join",
  "join(', ')", "int", "float", "abs", "title", "capitalize", "items", "reverse", "unique", "safe", "indent",
  "indent(2, true)", "default('D')", "default('D', true)", "tojson(indent=2)", "tojson(ensure_ascii=true)",
  "map(attribute='r')", "selectattr('r', 'equalto', 'user')", "rejectattr('v')", "dictsort", "sort(reverse=true)",
  "replace('l', 'L')", "count", "bool"];
const tests = ["defined", "undefined", "none", "string", "number", "integer", "mapping", "iterable", "sequence",
  "boolean", "true", "false", "odd", "even", "lower", "upper", "callable"];
const methods = ["upper()", "lower()", "strip()", "strip('H')", "split()", "split(',')", "split(' ', 1)",
  "startswith('He')", "endswith(('!', 'x'))", "replace('o', '0')", "replace('', '.')", "title()", "items()",
  "keys()", "values()", "get('a')", "get('zz', 5)", "lstrip()", "rstrip()", "capitalize()", "length", "count('l')"];
const binops = ["+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", ">", "<=", ">=", "in", "not in", "and", "or"];

function expr(depth) {
  const r = rnd();
  if (depth <= 0 || r < 0.3) return pick(atoms);
  if (r < 0.45) return `${expr(depth - 1)} ${pick(binops)} ${expr(depth - 1)}`;
  if (r < 0.6) return `(${expr(depth - 1)}) | ${pick(filters)}`;
  if (r < 0.7) return `${expr(depth - 1)} is ${rnd() < 0.3 ? "not " : ""}${pick(tests)}`;
  if (r < 0.8) return `${pick(atoms)}.${pick(methods)}`;
  if (r < 0.87) return `not ${expr(depth - 1)}`;
  if (r < 0.93) return `${expr(depth - 1)} if ${expr(depth - 1)} else ${expr(depth - 1)}`;
  return `-${pick(["n", "f", "1", "t", "s"])}`;
}
// Whitespace-control soup: text with spaces, tabs, newlines and Unicode spaces around tags.
const texts = ["", " ", "  ", "\t", "\n", "\n\n", " \n ", "\u00a0", "\u3000x", "a", "b c", "\r\n", "é "];
const dash = () => (rnd() < 0.4 ? "-" : "");
function wsBlock(depth) {
  let out = "";
  const k = 1 + Math.floor(rnd() * 4);
  for (let i = 0; i < k; ++i) {
    out += pick(texts);
    const r = rnd();
    if (r < 0.3) out += `{{${dash()} ${pick(["n", "s", "'x'", "e"])} ${dash()}}}`;
    else if (r < 0.45) out += `{#${dash()} c ${dash()}#}`;
    else if (r < 0.7 && depth > 0)
      out += `{%${dash()} if ${pick(["t", "no"])} ${dash()}%}${wsBlock(depth - 1)}{%${dash()} else ${dash()}%}${wsBlock(depth - 1)}{%${dash()} endif ${dash()}%}`;
    else if (depth > 0)
      out += `{%${dash()} for i in [1, 2] ${dash()}%}${wsBlock(depth - 1)}{%${dash()} endfor ${dash()}%}`;
    out += pick(texts);
  }
  return out;
}
// Macros, namespaces, call blocks, kwargs/varargs, set scoping.
function macroSoup() {
  const a = () => pick(atoms);
  return pick([
    `{% macro m(x, y=${a()}) %}[{{ x }}|{{ y }}|{{ kwargs | tojson }}]{% endmacro %}{{ m(${a()}, k=${a()}) }}{{ m(y=1, x=${a()}) }}`,
    `{% macro m(x) %}{{ x }}{{ varargs | length }}{% endmacro %}{{ m(${a()}, ${a()}, ${a()}) }}`,
    `{% macro m(x) %}{{ x }}{% endmacro %}{{ m(${a()}, ${a()}) }}`,
    `{% macro m(x) %}{{ x }}{% endmacro %}{{ m(z=${a()}) }}`,
    `{% set ns = namespace(v=${a()}, w=[]) %}{% for i in l %}{% set ns.v = i %}{% set ns.w = ns.w + [i] %}{% endfor %}{{ ns.v }}{{ ns.w }}{{ ns }}`,
    `{% set ns = namespace(d) %}{{ ns.b }}{{ ns.zz }}{% set ns.q = ${a()} %}{{ ns | tojson }}`,
    `{% macro w() %}<{{ caller() }}|{{ caller(1) if false else '' }}>{% endmacro %}{% call w() %}{{ ${a()} }}{% endcall %}`,
    `{% macro w(v) %}<{{ caller(v) }}>{% endmacro %}{% call(x) w(${a()}) %}{{ x | tojson }}{% endcall %}`,
    `{% set x = ${a()} %}{% macro m() %}{{ x }}{% endmacro %}{% for i in [1] %}{% set x = 'inner' %}{{ m() }}{% endfor %}{{ m() }}`,
    `{% for i in l %}{% set t = i %}{% endfor %}{{ t }}|{% if true %}{% set u = 5 %}{% endif %}{{ u }}`,
    `{{ m(1) }}{% macro m(a) %}{{ a }}{% endmacro %}`,
    `{% for x in l %}{% if loop.first %}{% continue %}{% endif %}{{ x }}{% else %}E{% endfor %}`,
    `{% for x in l %}{% break %}{% else %}E{% endfor %}`,
    `{% filter upper %}{{ ${a()} }}x{% endfilter %}`,
    `{{ ${a()} | string | length }}|{{ (${a()}, ${a()}) | length }}|{{ [${a()}] | tojson }}`,
  ]);
}
// Lexer soup: random token-ish pieces; mostly syntax errors, which must agree too.
const pieces = ["{{", "}}", "{%", "%}", "{#", "#}", "-", " ", "\n", "'a\\n'", "\"\\x41\"", "'\\u00e9'", "'\\q'",
  "x", "1", "1.5", ".", "{", "}", "(", ")", "[", "]", ",", ":", "|", "if", "endif", "for", "in", "set", "=", "\r\n",
  "\t", "é", "n", "+", "~", "'", "\\", "{{ n }}", "{% if t %}", "{% endif %}", "0", "-1", "**", "//", "not", "is"];
function lexSoup() {
  let out = "";
  const k = 1 + Math.floor(rnd() * 12);
  for (let i = 0; i < k; ++i) out += pick(pieces);
  return out;
}
function template() {
  if (process.env.FUZZ_WS) return wsBlock(2);
  if (process.env.FUZZ_LEX) return lexSoup();
  if (process.env.FUZZ_MACRO) return macroSoup();
  const r = rnd();
  if (r < 0.6) return `{{ ${expr(Number(process.env.FUZZ_DEPTH || 3))} }}`;
  if (r < 0.75) return `{% for x in ${pick(["l", "ls", "d", "objs", "ll", "s", "[]"])} %}{{ loop.index }}{{ ${pick(["x", "x | tojson", "loop.previtem", "loop.last"])} }},{% else %}E{% endfor %}`;
  if (r < 0.85) return `{% set v = ${expr(2)} %}{{ v }}|{{ v | tojson }}`;
  if (r < 0.92) return `{% for a, b in ${pick(["ll", "d.items()", "l"])} %}{{ a }}={{ b }};{% endfor %}`;
  return `{% macro m(a, b=${pick(atoms)}) %}{{ a }}/{{ b }}{% endmacro %}{{ m(${pick(atoms)}) }}{{ m(1, b=${pick(atoms)}) }}`;
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mmx-fuzz-"));
const srcs = [], files = [];
for (let i = 0; i < N; ++i) {
  const src = template();
  srcs.push(src);
  const f = path.join(dir, `t${i}.jinja`);
  fs.writeFileSync(f, src);
  files.push(f);
}
const theCase = { messages: [], add_generation_prompt: false, tools: null, kwargs: ctx };
const ref = srcs.map((src) => {
  try {
    return { ok: true, out: new Template(src).render({ messages: [], add_generation_prompt: false, tools: null, documents: null, ...ctx }) };
  } catch (e) {
    return { ok: false, err: String(e.message) };
  }
});
const run = spawnSync(args.driver, [], { input: JSON.stringify({ templates: files.map((f) => ({ file: f, config: null })), cases: [theCase] }), maxBuffer: 1 << 30 });
const ours = JSON.parse(run.stdout.toString()).results.map((r) => r[0]);
let bad = 0;
for (let i = 0; i < N; ++i) {
  const a = ref[i], b = ours[i];
  const same = a.ok === b.ok && (!a.ok || a.out === b.out);
  if (!same) {
    ++bad;
    console.log(`DIFF ${srcs[i]}\n  ref : ${a.ok ? JSON.stringify(a.out) : "ERR " + a.err}\n  ours: ${b.ok ? JSON.stringify(b.out) : "ERR " + b.err}`);
  }
}
fs.rmSync(dir, { recursive: true });
console.log(`${N - bad}/${N} random templates identical (${ref.filter((r) => r.ok).length} render, the rest raise in both)`);
process.exit(bad ? 1 : 0);
