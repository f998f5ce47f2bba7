// Builds the parity / benchmark corpus: hand-written edge cases first, then text gathered from
// files on this machine (Debian docs incl. .gz, C headers, Python sources, man pages), in sorted
// path order so the corpus is deterministic for a given machine. Records are byte strings
// (invalid UTF-8 allowed) written as (uint32 LE length, bytes).
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

function edgeCases() {
  const s = [
    '', ' ', '\n', 'a', 'Hello world', 'Hello, World! How are you?',
    '日本語のテキストと漢字。中文句子，包含标点符号！한국어 문장입니다.',
    'ПриветМир КакДела HTTPServer ДеЛа СЛОВО слово XMLHttpRequest ÀÉÎõü',
    '👨‍👩‍👧‍👦 family 👍🏽 thumbs 🏳️‍🌈 flag 🇩🇪🇫🇷 ❤️ e\u0301 a\u0300\u0301\u0302 \u1e0a\u0323 \u0041\u030a \u212b',
    'n\u0303o\u0308 Zalgo: Z\u0351\u0362a\u0350\u0346l\u0345g\u033eo\u0316 \u0915\u094d\u0937 \u0e01\u0e34\u0e4a',
    '\uac00\u11a8 \u1100\u1161\u11a8 \u1100\u1161 Hangul jamo',
    '          lots of spaces          \t\t\ttabs\n\n\n\n\nnewlines\r\n\r\nCRLF   \n  \n ',
    ' '.repeat(300) + 'x' + '\n'.repeat(200) + 'y' + '\t \n'.repeat(50),
    '1234567890 12 123 1234 12345 3.14159 1,000,000 ٣٤٥ ①②③ 2024-01-01T12:00:00Z',
    "I'm you're He'S THEY'LL we'VE she'd It's DON'T can't O'Neil 'quoted' ''",
    'special <|endoftext|> text <|im_start|>user\nhi<|im_end|> <think>x</think> ]~!b[ [e~[ ]~b]ai',
    '<|begin_of_text|><|start_header_id|>system<|end_header_id|> <｜begin▁of▁sentence｜> <|startoftext|><|endofprompt|>',
    'x<|endoftext|><|endoftext|>y <|endoftext|  |endoftext|> <|endoftext|>\n',
    'mixed\u00a0nbsp\u2003em\u3000ideo\u180emongol\u200bzwsp\u2028ls\u0085nel end',
    'code: for (int i = 0; i < n; ++i) { x += a[i] * b[i]; } // comment\n    return x;\n',
    'ſ \u212a Kelvin ǅ ǈ titlecase ᾈ ﬁ ligature ＡＢＣ ｱｲｳ',
    'URL https://example.com/path/to/file.html?a=1&b=2#frag and e-mail a.b@c.de',
    'a/b//c///d\n/\n//\r\n/x',
    'مرحبا بالعالم! هذا نصٌّ عربيّ مع أرقام ١٢٣ و123، وعلامات الترقيم؟ «اقتباس» الكتابةُ من اليمين',
    ']~!b[]~b]system\nYou are MiniMax.[e~[\n]~b]ai\n<think>\nhm\n</think>\n\n<minimax:tool_call>\n' +
      '<invoke name="f">\n<parameter name="k">v</parameter>\n</invoke>\n</minimax:tool_call>[e~[ ]!p~[' +
      ' ]<]image[>[ <mm:think>x</mm:think> ]<]minimax[>[<tool_call> <beginning_of_sentence>user name=user\n' +
      '<end_of_sentence> <fim_prefix>a<fim_suffix>b<fim_middle> ]~b]]~b] [e~[[e~[ <think></think>',
  ];
  const out = s.map((x) => Buffer.from(x, 'utf8'));
  // long runs (BPE / regex worst cases)
  out.push(Buffer.from(' '.repeat(20000)), Buffer.from('a'.repeat(20000)), Buffer.from('7'.repeat(5000)),
    Buffer.from('=-'.repeat(5000)), Buffer.from('\n \n '.repeat(3000)), Buffer.from('ПриветМир'.repeat(1000)),
    Buffer.from((' '.repeat(300) + 'x').repeat(30)));
  // every byte value (control characters, and invalid UTF-8 from 0x80 up)
  out.push(Buffer.from(Array.from({ length: 256 * 8 }, (_, i) => i % 256)));
  // invalid UTF-8
  out.push(Buffer.from([0x61, 0xff, 0x62, 0xc3, 0x28, 0xe2, 0x82, 0x20, 0xf0, 0x9f, 0x98]));
  out.push(Buffer.from([0xed, 0xa0, 0x80, 0x41, 0xc0, 0xaf, 0xf4, 0x90, 0x80, 0x80, 0x80, 0xe0, 0x80, 0xbf]));
  out.push(Buffer.concat([Buffer.from('valid text then '), Buffer.from([0xfe, 0xfe]), Buffer.from(' more <|endoftext|>')]));
  return out;
}

function walk(dir, filter, acc, limit) {
  let ents;
  try { ents = fs.readdirSync(dir, { withFileTypes: true }); } catch (e) { return; }
  ents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of ents) {
    if (acc.length >= limit) return;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, filter, acc, limit);
    else if (e.isFile() && filter(p)) acc.push(p);
  }
}

function readText(p, maxBytes) {
  let b;
  try { b = fs.readFileSync(p); } catch (e) { return null; }
  if (p.endsWith('.gz')) { try { b = zlib.gunzipSync(b); } catch (e) { return null; } }
  if (b.length === 0 || b.includes(0)) return null;  // skip binaries
  return b.subarray(0, maxBytes);
}

// Returns an array of Buffers totalling at least `targetBytes` (plus the edge cases).
function buildCorpus(targetBytes) {
  const recs = edgeCases();
  const sources = [
    ['/usr/share/doc', (p) => /(\.gz|README|\.txt|\.md|copyright|changelog)$/i.test(p), 800, 16384],
    ['/usr/share/man', (p) => p.endsWith('.gz'), 500, 16384],
    ['/usr/include', (p) => /\.(h|hpp)$/.test(p), 600, 16384],
    ['/usr/lib', (p) => /\/python3[^/]*\/.*\.py$/.test(p), 800, 16384],
  ];
  const share = Math.ceil(targetBytes / sources.length);
  for (const [dir, filter, limit, maxBytes] of sources) {
    const files = [];
    walk(dir, filter, files, limit * 4);
    let got = 0;
    for (const f of files) {
      if (got >= share) break;
      const t = readText(f, maxBytes);
      if (!t) continue;
      recs.push(t);
      got += t.length;
    }
  }
  return recs;
}

function writeRecords(file, recs) {
  const parts = [];
  for (const r of recs) {
    const h = Buffer.alloc(4);
    h.writeUInt32LE(r.length, 0);
    parts.push(h, r);
  }
  fs.writeFileSync(file, Buffer.concat(parts));
}

function readRecords(file) {
  const b = fs.readFileSync(file);
  const out = [];
  let i = 0;
  while (i + 4 <= b.length) {
    const n = b.readUInt32LE(i);
    i += 4;
    out.push(b.subarray(i, i + n));
    i += n;
  }
  return out;
}

module.exports = { buildCorpus, writeRecords, readRecords, edgeCases };

if (require.main === module) {
  const [out, mb] = process.argv.slice(2);
  const recs = buildCorpus(Number(mb || 6) * 1e6);
  writeRecords(out, recs);
  console.log(`${recs.length} records, ${recs.reduce((a, r) => a + r.length, 0)} bytes -> ${out}`);
}
