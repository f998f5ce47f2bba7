// Pre-tokenizers (see pretokenizer.h). Split semantics follow HF tokenizers'
// `NormalizedString::split`: the text is cut into (segment, is_match) runs, then the behavior
// decides which runs are kept and how delimiters attach.
#include "tokenizer/pretokenizer.h"

#include "base/scratch.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "base/error.h"

namespace mmx::tok {

using nlohmann::json;

namespace {
// GPT-2's pattern, used by ByteLevel when use_regex=true.
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

SplitBehavior parse_behavior(const std::string& b) {
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  fail("tokenizer.json: unknown Split behavior '{}'", b);
}

struct Seg {
  uint32_t b, e;
  bool m;
};
}  // namespace

PreTokenizer PreTokenizer::from_json(const json& j) {
  PreTokenizer p;
  if (!j.is_null()) p.add_json(j, true);
  return p;
}

void PreTokenizer::add_json(const json& j, bool is_last) {
  if (byte_level_) fail("tokenizer.json: a pre-tokenizer after ByteLevel is not supported");
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    const json& list = j.at("pretokenizers");
    for (size_t i = 0; i < list.size(); ++i) add_json(list[i], is_last && i + 1 == list.size());
    return;
  }
  Step s;
  if (type == "Split") {
    const json& pat = j.at("pattern");
    if (pat.contains("Regex")) {
      s.regex = std::make_shared<Regex>(pat.at("Regex").get<std::string>());
    } else if (pat.contains("String")) {
      s.literal = pat.at("String").get<std::string>();
      if (s.literal.empty()) fail("tokenizer.json: Split with an empty String pattern");
    } else {
      fail("tokenizer.json: Split pattern must be Regex or String");
    }
    s.behavior = parse_behavior(j.at("behavior").get<std::string>());
    s.invert = j.value("invert", false);
  } else if (type == "Digits") {
    const bool individual = j.value("individual_digits", false);
    // Rust char::is_numeric == \p{N}; runs of them are one Contiguous segment.
    s.regex = std::make_shared<Regex>(individual ? "\\p{N}" : "\\p{N}+");
    s.behavior = SplitBehavior::kIsolated;
  } else if (type == "ByteLevel") {
    if (j.value("add_prefix_space", false))
      fail("tokenizer.json: ByteLevel pre-tokenizer with add_prefix_space=true is not supported");
    if (!is_last) fail("tokenizer.json: ByteLevel must be the last pre-tokenizer");
    byte_level_ = true;
    if (!j.value("use_regex", true)) return;
    s.regex = std::make_shared<Regex>(kGpt2Pattern);
    s.behavior = SplitBehavior::kIsolated;
  } else {
    fail("tokenizer.json: pre-tokenizer '{}' is not supported (supported: Split, Digits, ByteLevel, Sequence)", type);
  }
  steps_.push_back(std::move(s));
}

void PreTokenizer::apply(const Step& s, std::string_view text, const std::vector<Piece>& in, std::vector<Piece>& out) {
  thread_local std::vector<std::pair<size_t, size_t>> matches;
  thread_local std::vector<Seg> segs, res;
  for (const Piece& p : in) {
    const std::string_view sub = text.substr(p.begin, p.end - p.begin);
    matches.clear();
    if (s.regex) {
      s.regex->find_all(sub, matches);
    } else {
      for (size_t pos = sub.find(s.literal); pos != std::string_view::npos; pos = sub.find(s.literal, pos + s.literal.size()))
        matches.emplace_back(pos, pos + s.literal.size());
    }
    segs.clear();
    uint32_t cur = 0;
    for (auto [b, e] : matches) {
      if (b > cur) segs.push_back({cur, uint32_t(b), s.invert});
      segs.push_back({uint32_t(b), uint32_t(e), !s.invert});
      cur = uint32_t(e);
    }
    if (cur < sub.size()) segs.push_back({cur, uint32_t(sub.size()), s.invert});

    res.clear();
    bool prev_match = false;
    switch (s.behavior) {
      case SplitBehavior::kIsolated:
        res = segs;
        break;
      case SplitBehavior::kRemoved:
        for (const Seg& g : segs)
          if (!g.m) res.push_back(g);
        break;
      case SplitBehavior::kMergedWithPrevious:
        for (const Seg& g : segs) {
          if (g.m && !prev_match && !res.empty()) res.back().e = g.e;
          else res.push_back(g);
          prev_match = g.m;
        }
        break;
      case SplitBehavior::kMergedWithNext:
        for (size_t k = segs.size(); k-- > 0;) {
          const Seg& g = segs[k];
          if (g.m && !prev_match && !res.empty()) res.back().b = g.b;
          else res.push_back(g);
          prev_match = g.m;
        }
        std::reverse(res.begin(), res.end());
        break;
      case SplitBehavior::kContiguous:
        for (const Seg& g : segs) {
          if (g.m == prev_match && !res.empty()) res.back().e = g.e;
          else res.push_back(g);
          prev_match = g.m;
        }
        break;
    }
    for (const Seg& g : res)
      if (g.e > g.b) out.push_back({p.begin + g.b, p.begin + g.e});
  }
  release_if_large(matches);
  release_if_large(segs);
  release_if_large(res);
}

void PreTokenizer::split(std::string_view text, std::vector<Piece>& out) const {
  if (text.empty()) return;
  if (steps_.empty()) {
    out.push_back({0, uint32_t(text.size())});
    return;
  }
  thread_local std::vector<Piece> a, b;
  a.assign(1, Piece{0, uint32_t(text.size())});
  for (size_t k = 0; k < steps_.size(); ++k) {
    std::vector<Piece>& dst = k + 1 == steps_.size() ? out : b;
    if (&dst == &b) b.clear();
    apply(steps_[k], text, a, dst);
    if (&dst == &b) std::swap(a, b);
  }
  release_if_large(a);
  release_if_large(b);
}

}  // namespace mmx::tok

