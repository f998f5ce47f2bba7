// Trained-tokenizer parity test: `mmx train-tokenizer` on the corpus of scripts/prepare_corpus.py,
// then our ids (tok_driver) vs Hugging Face tokenizers (npm @anush008/tokenizers, native Rust) on
// the held-out val split, a slice of the train split and the edge cases of corpus.js.
//   node bpe_parity.js BUILD_DIR MMX TOK_DRIVER [VOCAB] [MAX_MB]
// Checks: training twice gives byte-identical files; HF loads the tokenizer with VOCAB ids and
// the special tokens at the last ids; ids identical for every record; our decode(ids) == HF
// decode(ids); decode(encode(x)) == x for every valid UTF-8 record.
// Exit 0 = pass, 1 = failure, 77 = SKIPPED (the reason printed); when a missing reference may
// skip and when it fails is tests/npm/reference.js's rule.
'use strict';
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const { spawnSync } = require('child_process');
const corpus = require('./corpus.js');

const [buildDir, mmx, driver, vocabArg, mbArg] = process.argv.slice(2);
const VOCAB = Number(vocabArg || 2048);
const MAX_MB = Number(mbArg || 2);
if (!buildDir || !mmx || !driver) {
  console.error('usage: node bpe_parity.js BUILD_DIR MMX TOK_DRIVER [VOCAB] [MAX_MB]');
  process.exit(2);
}
function fail(why) {
  console.log(`FAIL: ${why}`);
  process.exit(1);
}

// ---- the reference ----
const npmDir = path.join(buildDir, 'npm');
const nm = path.join(npmDir, 'node_modules');
require('../npm/reference.js').need(npmDir, '@anush008/tokenizers', 'HF parity of the trained tokenizer');
const { Tokenizer } = require(path.resolve(nm, '@anush008', 'tokenizers'));

function run(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (r.status !== 0) fail(`${cmd} ${args.join(' ')} exited ${r.status}: ${r.error || ''}${r.stderr}`);
  return r;
}
const sha = (file) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');

(async () => {
  const t0 = Date.now();
  const work = path.join(buildDir, 'bpe-parity');
  fs.rmSync(work, { recursive: true, force: true });
  fs.mkdirSync(path.join(work, 'tok'), { recursive: true });
  fs.mkdirSync(path.join(work, 'tok2'), { recursive: true });

  // ---- corpus and training ----
  const corpusDir = path.join(work, 'corpus');
  const prep = run('/usr/bin/python3', [path.join(__dirname, '..', '..', 'scripts', 'prepare_corpus.py'), corpusDir, '--max-mb', String(MAX_MB)]);
  process.stdout.write(prep.stdout);
  const tokFile = path.join(work, 'tok', 'tokenizer.json');
  const t1 = Date.now();
  const tr = run(mmx, ['train-tokenizer', '--data', path.join(corpusDir, 'train.txt'), '--vocab', String(VOCAB), '-o', tokFile]);
  const trainS = (Date.now() - t1) / 1000;
  process.stdout.write(tr.stderr.split('\n').filter((l) => !l.includes('merges ')).join('\n'));
  run(mmx, ['train-tokenizer', '--data', path.join(corpusDir, 'train.txt'), '--vocab', String(VOCAB), '-o', path.join(work, 'tok2', 'tokenizer.json')]);
  for (const f of ['tokenizer.json', 'tokenizer_config.json'])
    if (sha(path.join(work, 'tok', f)) !== sha(path.join(work, 'tok2', f))) fail(`training twice gave different ${f}`);

  // ---- the tokenizer as HF sees it ----
  const hf = Tokenizer.fromFile(tokFile);
  const conf = JSON.parse(fs.readFileSync(path.join(work, 'tok', 'tokenizer_config.json'), 'utf8'));
  const tj = JSON.parse(fs.readFileSync(tokFile, 'utf8'));
  let failed = false;
  const problem = (m) => { console.log(`  ${m}`); failed = true; };
  if (hf.getVocabSize(true) !== VOCAB) problem(`HF vocab size ${hf.getVocabSize(true)} != ${VOCAB}`);
  const specials = tj.added_tokens.map((a) => a.content);
  specials.forEach((s, i) => {
    if (hf.tokenToId(s) !== VOCAB - specials.length + i) problem(`HF id of ${s} is ${hf.tokenToId(s)}, want ${VOCAB - specials.length + i}`);
  });
  for (const k of ['bos_token', 'eos_token', 'pad_token'])
    if (!specials.includes(conf[k])) problem(`tokenizer_config ${k} ${conf[k]} is not a special token`);
  if (typeof conf.chat_template !== 'string' || !conf.chat_template.includes(']~b]')) problem('tokenizer_config has no M2 chat template');

  // ---- records: the whole val text, each val file, a train slice, the edge cases ----
  const splitFiles = (buf) => {
    const out = [];
    const sep = Buffer.from('# ==== ');
    let at = buf.indexOf(sep);
    while (at >= 0) {
      let next = buf.indexOf(sep, at + 1);
      while (next > 0 && buf[next - 1] !== 0x0a) next = buf.indexOf(sep, next + 1);  // separators start a line
      out.push(buf.subarray(at, next < 0 ? buf.length : next));
      at = next;
    }
    return out;
  };
  const val = fs.readFileSync(path.join(corpusDir, 'val.txt'));
  const valFiles = splitFiles(val);
  const trainSlice = [];
  let sliceBytes = 0;
  for (const f of splitFiles(fs.readFileSync(path.join(corpusDir, 'train.txt')))) {
    if (sliceBytes > 400e3) break;
    trainSlice.push(f);
    sliceBytes += f.length;
  }
  const edge = corpus.edgeCases();
  const recs = [val, ...valFiles, ...trainSlice, ...edge];
  const recFile = path.join(work, 'records.bin');
  corpus.writeRecords(recFile, recs);
  const ids = path.join(work, 'ours.ids'), dec = path.join(work, 'ours.dec');
  run(driver, ['encode', tokFile, recFile, ids, dec, '0']);
  const ourIds = fs.readFileSync(ids, 'utf8').split('\n');
  const ourDec = corpus.readRecords(dec);
  const hfIds = (await hf.encodeBatch(recs.map((r) => r.toString('utf8')), { addSpecialTokens: false })).map((e) => e.getIds());
  const hfDec = await hf.decodeBatch(hfIds, false);

  const groups = [['val (whole)', 0, 1], ['val files', 1, 1 + valFiles.length],
    ['train slice', 1 + valFiles.length, 1 + valFiles.length + trainSlice.length], ['edge cases', recs.length - edge.length, recs.length]];
  for (const [name, lo, hi] of groups) {
    let bytes = 0, tokens = 0, idMismatch = 0, decMismatch = 0, roundtripFail = 0;
    for (let i = lo; i < hi; ++i) {
      bytes += recs[i].length;
      tokens += hfIds[i].length;
      if (ourIds[i] !== hfIds[i].join(' ')) {
        if (idMismatch++ < 3) {
          const a = ourIds[i].split(' '), b = hfIds[i].map(String);
          let k = 0;
          while (k < a.length && a[k] === b[k]) ++k;
          problem(`${name} record ${i}: ids differ at #${k}: ours ${a.slice(k, k + 6).join(' ')} | hf ${b.slice(k, k + 6).join(' ')}`);
        }
      }
      if (!Buffer.from(hfDec[i], 'utf8').equals(ourDec[i]) && decMismatch++ < 3) problem(`${name} record ${i}: decode differs from HF`);
      const valid = Buffer.from(recs[i].toString('utf8'), 'utf8').equals(recs[i]);
      if (valid && !ourDec[i].equals(recs[i]) && roundtripFail++ < 3) problem(`${name} record ${i}: decode(encode(x)) != x`);
    }
    const ok = idMismatch + decMismatch + roundtripFail === 0;
    console.log(`${ok ? 'PASS' : 'FAIL'} ${name}: ${hi - lo} records, ${bytes} bytes, ${tokens} tokens` +
      `${bytes ? ` (${(bytes / Math.max(tokens, 1)).toFixed(2)} bytes/token)` : ''}; id mismatches ${idMismatch}, ` +
      `decode mismatches ${decMismatch}, round-trip failures ${roundtripFail}`);
  }
  console.log(`vocab ${VOCAB} trained in ${trainS.toFixed(2)} s on train.txt (max ${MAX_MB} MB); total ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  console.log(failed ? 'trained tokenizer HF parity: FAILED' : 'trained tokenizer HF parity: all identical');
  process.exit(failed ? 1 : 0);
})();
