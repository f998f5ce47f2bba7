// A compiled PCRE2 regex (UTF + UCP + JIT) with Oniguruma-compatible \s, for pre-tokenizer
// Split patterns and the ByteLevel GPT-2 pattern.
//
// HF tokenizers runs its patterns with Oniguruma; PCRE2 agrees on the constructs the real
// tokenizer.json files use (\p{..} categories, (?i:..), lookahead, classes) except \s / \S:
// PCRE2's UCP \s also matches U+180E, Oniguruma's does not. The pattern is therefore rewritten
// so that \s means exactly [\t\n\v\f\r\x{85}\p{Z}] (Oniguruma's Unicode \s). \S inside a
// character class is refused (no listed tokenizer uses it).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mmx::tok {

class Regex {
 public:
  // Throws mmx::Error naming the pattern and PCRE2's message if it does not compile.
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // Non-overlapping matches left to right as (begin, end) byte offsets into `text` (valid UTF-8).
  // Empty matches are skipped (the scan advances one code point past them).
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pattern_;
};

// The \s rewrite described above (exposed for tests).
std::string regex_rewrite_whitespace(const std::string& pattern);

}  // namespace mmx::tok
