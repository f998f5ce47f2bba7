// Training data: a text tokenized once into one id stream, and the windows a step trains on.
//
// Windows are a pure function of (seed, step, row): a resumed run draws the same ones, and the
// held-out windows are fixed (non-overlapping, from the start of the held-out stream).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace mmx::train {

struct TokenData {
  std::vector<int32_t> ids;  // [n] the whole text's ids

  int64_t size() const { return int64_t(ids.size()); }
  // Rows row0 .. row0+n-1 of step `step`: each a uniformly drawn window of seq_len + 1 ids;
  // tokens/targets are resized to [n, seq_len] (targets = tokens shifted by one).
  void sample_windows(uint64_t seed, int64_t step, int64_t row0, int64_t n, int64_t seq_len,
                      std::vector<int32_t>& tokens, std::vector<int32_t>& targets) const;
  // Windows w0 .. w0+n-1 in order: window w starts at id w·seq_len (every id after the first is a
  // target exactly once across consecutive windows).
  void windows_in_order(int64_t w0, int64_t n, int64_t seq_len, std::vector<int32_t>& tokens,
                        std::vector<int32_t>& targets) const;
};

// Encodes `text` (no BOS/EOS added), in parallel over chunks cut after a '\n' that precedes an
// ASCII letter or digit — where no M2 pre-tokenizer piece can continue, so the ids equal a single
// encode() of the whole text. what != null: a progress line on stderr naming it.
TokenData tokenize_corpus(const tok::Tokenizer& tk, std::string_view text, const char* what);

}  // namespace mmx::train
