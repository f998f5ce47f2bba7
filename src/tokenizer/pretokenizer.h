// Pre-tokenizers of HF tokenizer.json: cut normalized text into pieces that BPE encodes
// independently. Supported: Split (Regex or String pattern; behaviors Removed, Isolated,
// MergedWithPrevious, MergedWithNext, Contiguous; invert), Digits, ByteLevel (as the LAST step,
// add_prefix_space=false; use_regex=true applies the GPT-2 pattern), Sequence, null.
// Refused with mmx::Error: Metaspace, Whitespace, WhitespaceSplit, Punctuation, BertPreTokenizer,
// CharDelimiterSplit, UnicodeScripts, FixedLength, ByteLevel(add_prefix_space=true), ByteLevel
// followed by another step.
//
// Pieces are byte ranges of the input: pre-tokenizers here never rewrite text. ByteLevel's
// byte -> alphabet mapping is folded into the BPE model (it works on raw bytes), so this class
// only reports whether it was present.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace mmx::tok {

struct Piece {
  uint32_t begin, end;  // [begin, end) byte offsets into the pre-tokenized text
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  PreTokenizer() = default;  // identity: the whole text is one piece
  // `j` is tokenizer.json's "pre_tokenizer" value (may be null).
  static PreTokenizer from_json(const nlohmann::json& j);

  // Cuts `text` (valid UTF-8) into pieces, appended to `out` in order; empty pieces are dropped.
  void split(std::string_view text, std::vector<Piece>& out) const;

  // True when a ByteLevel pre-tokenizer ends the chain (the model then works on bytes).
  bool is_byte_level() const { return byte_level_; }

 private:
  struct Step {
    std::shared_ptr<Regex> regex;  // Split(Regex), Digits, ByteLevel(use_regex)
    std::string literal;           // Split(String)
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
  };
  void add_json(const nlohmann::json& j, bool is_last);
  static void apply(const Step& s, std::string_view text, const std::vector<Piece>& in, std::vector<Piece>& out);

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace mmx::tok
