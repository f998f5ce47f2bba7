// Normalizers of HF tokenizer.json, applied to the text between added tokens before
// pre-tokenization. Supported: NFC, Sequence, Replace (String pattern), Prepend, null.
// Refused with mmx::Error: NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, BertNormalizer,
// Precompiled, Nmt, Replace with a Regex pattern.
// Input and output are valid UTF-8; offsets are not tracked (encode returns ids only).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace mmx::tok {

class Normalizer {
 public:
  Normalizer() = default;  // identity
  static Normalizer from_json(const nlohmann::json& j);

  bool is_identity() const { return steps_.empty(); }
  // Normalizes `in` into `out` (cleared first).
  void apply(std::string_view in, std::string& out) const;

 private:
  enum class Kind { kNfc, kReplace, kPrepend };
  struct Step {
    Kind kind;
    std::string a, b;  // Replace: pattern, content; Prepend: prefix
  };
  void add_json(const nlohmann::json& j);
  std::vector<Step> steps_;
};

}  // namespace mmx::tok
