// Byte-level BPE training in the MiniMax-M2 format: learns merges from a text and writes a
// Hugging Face tokenizer.json (+ tokenizer_config.json) that mmx::tok::Tokenizer and HF
// `tokenizers` both load, with identical ids (tests/tokenizer/bpe_parity.js).
//
// What is trained, exactly:
//   * the text is decoded lossily (invalid UTF-8 -> U+FFFD, as the encoder does), occurrences of
//     the special tokens are cut out (the encoder never sends them through BPE), and the rest is
//     pre-tokenized with the M2 Split regex (tokenizer/m2_tokens.h) by our own PreTokenizer
//     built from the very pre_tokenizer JSON that is written out;
//   * ids 0..255 are the 256 bytes (id = byte value, written in the GPT-2 byte alphabet); merges
//     get ids 256.. in the order learned; the special tokens take the LAST ids;
//   * each step merges the adjacent pair with the highest count over all words (a word's count =
//     how often the piece occurs); ties go to the lexicographically smallest pair, comparing the
//     left tokens' bytes, then the right tokens' bytes (unsigned, like memcmp). Pairs counted
//     fewer than min_frequency times are never merged;
//   * a merge whose result is already a token (e.g. "a"+"bc" after "ab"+"c") is recorded but takes
//     no new id (HF's BpeTrainer does the same); training stops when the vocabulary is full or no
//     pair reaches min_frequency — then the vocabulary is smaller than asked (`vocab_size` below
//     says what it is).
//
// Cost: words are counted once; pair counts are updated incrementally, and an index from each
// pair to the words holding it limits every merge to the words it changes; a max-heap with lazy
// re-checks picks the best pair. 9.7 MB of Python source to 4096 ids takes under a second on one
// core (numbers in docs/data.md).
//
// Not here: other pre-tokenizers, normalizers, char-level (non-byte) BPE, dropout, parallelism.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mmx::tok {

struct BpeTrainOptions {
  // Total ids: 256 bytes + learned merges + special tokens. >= 256 + n_specials + 1.
  int vocab_size = 4096;
  // A pair seen fewer times than this (summed over the text) is never merged; >= 1.
  int64_t min_frequency = 2;
  // Added special tokens, in id order, at the last ids. Empty = the M2 set (m2_tokens.h).
  std::vector<std::string> special_tokens;
  // tokenizer_config.json fields; bos / eos / pad must be among the special tokens.
  std::string bos_token = "]~!b[", eos_token = "[e~[", pad_token = "]!p~[";
  std::string chat_template;  // "" = no chat_template key
  int64_t model_max_length = 4096;
};

struct BpeTrainProgress {
  enum class Stage { kPretokenize, kMerge };
  Stage stage;
  int64_t done, total;  // kPretokenize: bytes; kMerge: new ids
};
using BpeProgressFn = std::function<void(const BpeTrainProgress&)>;

struct TrainedTokenizer {
  std::string tokenizer_json;         // tokenizer.json contents
  std::string tokenizer_config_json;  // tokenizer_config.json contents
  int32_t bos_id = -1, eos_id = -1, pad_id = -1;
  int32_t vocab_size = 0;  // 1 + the largest id (== options.vocab_size unless training stopped early)
  // The merges in rank order as raw bytes (left, right); their count may exceed the new ids
  // (see the header note on merges that produce an existing token).
  std::vector<std::pair<std::string, std::string>> merges;
  // Statistics of the input.
  int64_t n_bytes = 0;         // text bytes after the lossy UTF-8 decode
  int64_t n_pieces = 0;        // pre-tokenized pieces (special-token occurrences excluded)
  int64_t n_unique_words = 0;  // distinct pieces
  int64_t n_specials_in_text = 0;
  bool stopped_early = false;  // no pair reached min_frequency before the vocabulary was full
};

// Trains on `text` (any bytes). Throws mmx::Error when the options are invalid (vocab too
// small, bad special tokens) or the text has nothing to train on. `progress` (may be empty) is
// called from this thread during pre-tokenization and every few merges, and once at the end of
// each stage (done == total).
TrainedTokenizer train_bpe(std::string_view text, const BpeTrainOptions& options, const BpeProgressFn& progress = {});

// ---- building blocks (exposed for tests) ----

// The pre-tokenized pieces of `text` (valid UTF-8, no special tokens) with the M2 Split regex,
// as the trainer sees them: chunk by chunk (cut after a '\n' that precedes an ASCII letter or
// digit, where no match of the pattern can continue), so memory stays bounded for large texts.
// Must equal PreTokenizer's pieces of the whole text in one go (tested).
std::vector<std::string_view> bpe_pretokenize_m2(std::string_view text);

}  // namespace mmx::tok
