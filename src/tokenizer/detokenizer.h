// Incremental detokenizer for streaming: feed ids one at a time, get back only text that can no
// longer change. The concatenation of every push() plus flush() equals
// Tokenizer::decode(all ids, skip_special_tokens) exactly.
//
// Byte-level decoders: each id's bytes are appended to a pending buffer; the longest prefix that
// ends on a complete UTF-8 sequence is emitted (invalid bytes become U+FFFD as in decode), and an
// incomplete trailing sequence (1..3 bytes) is held back until the next id completes it — or
// until flush(), which emits it as U+FFFD. Other decoders: tokens are joined with ' ' as decode does.
//
// Not thread-safe (one per stream); the Tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <string>

namespace mmx::tok {

class Tokenizer;

class Detokenizer {
 public:
  explicit Detokenizer(const Tokenizer& tok, bool skip_special_tokens = false);

  // Adds one id; returns the newly completed text (possibly empty). Unknown ids are skipped.
  std::string push(int32_t id);
  // End of stream: returns whatever is held back (incomplete UTF-8 -> U+FFFD) and resets.
  std::string flush();
  // Bytes currently held back (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  bool first_ = true;     // null decoder: no ' ' before the first token
  std::string pending_;   // undecided bytes (an incomplete UTF-8 tail)
  std::string scratch_;
};

}  // namespace mmx::tok
