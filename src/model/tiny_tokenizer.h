// A small byte-level BPE tokenizer in the Hugging Face tokenizer.json format, trained at
// make-tiny time on an embedded English paragraph, with the MiniMax-M2 special tokens and the
// M2 pre-tokenizer regex (spec §6.1). It makes tiny checkpoints complete HF directories.
#pragma once

#include <cstdint>
#include <string>

namespace mmx {

struct TinyTokenizer {
  int64_t bos_id = 0;
  int64_t eos_id = 0;
  std::string tokenizer_json;         // tokenizer.json contents
  std::string tokenizer_config_json;  // tokenizer_config.json contents (with the M2 chat template)
};

// vocab_size = 256 byte tokens + merges + special tokens (the last ids).
TinyTokenizer build_tiny_tokenizer(int vocab_size);

}  // namespace mmx
