// Added tokens of HF tokenizer.json ("added_tokens"): strings matched in the input BEFORE
// normalization/pre-tokenization and emitted as one id each.
//
// As in HF's AddedVocabulary: tokens with normalized=false are matched on the raw text, those with
// normalized=true on the normalized text (their content normalized the same way); matching is
// leftmost-longest (a byte trie); lstrip / rstrip widen a match over adjacent Unicode whitespace.
// Special tokens are always matched in the text (HF's default, split_special_tokens=false).
// Refused: single_word=true, and a declared id that differs from the id HF assigns when it loads
// the file (HF re-adds the tokens: an existing vocabulary/added id by content, else the next id
// after max(vocab size, previous added ids)) — HF would silently use its own id there.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mmx::tok {

class Normalizer;
class BpeModel;

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false, lstrip = false, rstrip = false, normalized = false;
};

// A run of the input: an added token (id >= 0) or plain text (id == -1) to encode further.
struct Segment {
  uint32_t begin, end;  // byte range of the text given to split()
  int32_t id;
};

class AddedVocab {
 public:
  // `j` is the "added_tokens" array (may be missing/null). Normalized tokens' contents are
  // passed through `norm` for matching; `model` gives the vocabulary for the id check.
  static AddedVocab from_json(const nlohmann::json& j, const Normalizer& norm, const BpeModel& model);

  // Splits `text` with the raw-text tokens (normalized_pass=false) or the normalized-text ones.
  void split(std::string_view text, bool normalized_pass, std::vector<Segment>& out) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* find_id(int32_t id) const;  // nullptr when id is not an added token
  int32_t find_content(std::string_view content) const;  // -1 when absent

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> next;  // sorted by byte
    int32_t token = -1;                             // index into tokens_
  };
  struct Trie {
    std::vector<Node> nodes{Node{}};
    bool first[256] = {};
    void add(std::string_view s, int32_t token);
    // Longest token starting at text[i]: (token index, length) or (-1, 0).
    std::pair<int32_t, size_t> longest(std::string_view text, size_t i) const;
  };
  std::vector<AddedToken> tokens_;
  std::vector<int32_t> by_id_;  // id -> index into tokens_ or -1
  Trie raw_, normalized_;
};

}  // namespace mmx::tok
