// Assembles a full-size (200K) MiniMax tokenizer.json — a RECONSTRUCTION, not the shipped file —
// from the shared tokenizer material (../shared/data/minimax-tokenizer: the official MiniMax-M1
// merges.txt, a transcribed special_tokens.json, M1's config.json and tokenizer_config.json) and
// the pre-tokenizer split regex of spec §6.1. tests/tokenizer/MINIMAX_200K.md states the rules.
//
// Vocabulary ids:
//   0..255       the 256 byte symbols in GPT-2 bytes_to_unicode order (printable bytes 33..126,
//                161..172, 174..255 first, then the other 68 bytes mapped to U+0100..U+0143), as
//                GPT-2's vocab.json numbers them ("!" = 0, "Ġ" (space) = 220, "Ċ" (newline) = 198);
//   256 + i      the token made by merge line i of merges.txt (after the "#version" header);
//   the special tokens at their ids in special_tokens.json (added tokens, special: true).
// Checked while assembling: every merge joins two known tokens and makes a new one, the merges
// end exactly where the special tokens begin (200,000), ids are unique, and the largest id is
// below M1's config vocab_size (200,064 embedding rows; the rows above the last token are padding).
//
//   node minimax_200k.js SHARED_TOKENIZER_DIR OUT_TOKENIZER_JSON     (or require() it: build())
'use strict';
const fs = require('fs');
const path = require('path');

// spec §6.1 (llama.cpp's record of the original tokenizer.json pattern); the same string as
// src/tokenizer/m2_tokens.h kM2SplitRegex.
const SPLIT_REGEX =
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?" +
  "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?" +
  "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// GPT-2 bytes_to_unicode, in its own order: [byte, symbol] for ids 0..255.
function byteAlphabet() {
  const bs = [];
  for (let b = 33; b <= 126; ++b) bs.push(b);
  for (let b = 161; b <= 172; ++b) bs.push(b);
  for (let b = 174; b <= 255; ++b) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; ++b)
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  return bs.map((b, i) => [b, String.fromCodePoint(cs[i])]);
}

function fail(msg) {
  throw new Error(`minimax_200k: ${msg}`);
}

// Returns { json (the tokenizer.json text), nMerges, vocabSize (largest id + 1), configVocab }.
function build(sharedDir) {
  const read = (f) => fs.readFileSync(path.join(sharedDir, f), 'utf8');
  const lines = read('merges.txt').split('\n');
  if (!lines[0].startsWith('#version')) fail('merges.txt does not start with a #version line');
  const merges = lines.slice(1).filter((l) => l.length > 0);
  const specials = JSON.parse(read('special_tokens.json')).special_tokens;
  const config = JSON.parse(read('MiniMax-M1-config.json'));

  const vocab = new Map();
  for (const [i, [, sym]] of byteAlphabet().entries()) vocab.set(sym, i);
  for (const [i, m] of merges.entries()) {
    const parts = m.split(' ');
    if (parts.length !== 2) fail(`merge line ${i + 2} is not two symbols: ${JSON.stringify(m)}`);
    if (!vocab.has(parts[0]) || !vocab.has(parts[1])) fail(`merge line ${i + 2} joins an unknown token: ${JSON.stringify(m)}`);
    const t = parts[0] + parts[1];
    if (vocab.has(t)) fail(`merge line ${i + 2} makes an existing token: ${JSON.stringify(t)}`);
    vocab.set(t, 256 + i);
  }
  const firstSpecial = Math.min(...Object.values(specials));
  if (256 + merges.length !== firstSpecial)
    fail(`256 bytes + ${merges.length} merges end at id ${256 + merges.length}, but the special tokens start at ${firstSpecial}`);
  const added = [];
  for (const [content, id] of Object.entries(specials).sort((a, b) => a[1] - b[1])) {
    if (vocab.has(content)) fail(`special token ${content} is also a merged token`);
    vocab.set(content, id);
    added.push({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  }
  const ids = new Set(vocab.values());
  if (ids.size !== vocab.size) fail('two tokens share an id');
  let vocabSize = 0;
  for (const id of ids) vocabSize = Math.max(vocabSize, id + 1);
  if (vocabSize > config.vocab_size) fail(`largest id ${vocabSize - 1} >= config vocab_size ${config.vocab_size}`);

  const tj = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: SPLIT_REGEX }, behavior: 'Isolated', invert: false },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: false,
      vocab: Object.fromEntries(vocab), merges,
    },
  };
  return { json: JSON.stringify(tj), nMerges: merges.length, vocabSize, configVocab: config.vocab_size };
}

module.exports = { build, SPLIT_REGEX };

if (require.main === module) {
  const [dir, out] = process.argv.slice(2);
  if (!dir || !out) {
    console.error('usage: node minimax_200k.js SHARED_TOKENIZER_DIR OUT_TOKENIZER_JSON');
    process.exit(2);
  }
  const r = build(dir);
  fs.writeFileSync(out, r.json);
  console.log(`${out}: 256 bytes + ${r.nMerges} merges + specials; ids 0..${r.vocabSize - 1} (config vocab_size ${r.configVocab})`);
}
