// Added-token matching (see added_tokens.h).
#include "tokenizer/added_tokens.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <unordered_map>

#include "base/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/unicode.h"

namespace mmx::tok {

using nlohmann::json;

void AddedVocab::Trie::add(std::string_view s, int32_t token) {
  int32_t cur = 0;
  for (char ch : s) {
    const uint8_t c = uint8_t(ch);
    auto& nx = nodes[size_t(cur)].next;
    auto it = std::lower_bound(nx.begin(), nx.end(), c, [](const auto& p, uint8_t v) { return p.first < v; });
    if (it != nx.end() && it->first == c) {
      cur = it->second;
    } else {
      const int32_t n = int32_t(nodes.size());
      nx.insert(it, {c, n});
      nodes.emplace_back();  // invalidates nx; not used afterwards
      cur = n;
    }
  }
  if (nodes[size_t(cur)].token < 0) nodes[size_t(cur)].token = token;  // first listed wins a tie
  if (!s.empty()) first[uint8_t(s[0])] = true;
}

std::pair<int32_t, size_t> AddedVocab::Trie::longest(std::string_view text, size_t i) const {
  std::pair<int32_t, size_t> best{-1, 0};
  int32_t cur = 0;
  for (size_t k = i; k < text.size(); ++k) {
    const auto& nx = nodes[size_t(cur)].next;
    const uint8_t c = uint8_t(text[k]);
    auto it = std::lower_bound(nx.begin(), nx.end(), c, [](const auto& p, uint8_t v) { return p.first < v; });
    if (it == nx.end() || it->first != c) break;
    cur = it->second;
    if (nodes[size_t(cur)].token >= 0) best = {nodes[size_t(cur)].token, k + 1 - i};
  }
  return best;
}

AddedVocab AddedVocab::from_json(const json& j, const Normalizer& norm, const BpeModel& model) {
  AddedVocab v;
  if (j.is_null()) return v;
  for (const json& t : j) {
    AddedToken a;
    a.id = t.at("id").get<int32_t>();
    a.content = t.at("content").get<std::string>();
    a.special = t.value("special", false);
    a.lstrip = t.value("lstrip", false);
    a.rstrip = t.value("rstrip", false);
    a.normalized = t.value("normalized", !a.special);
    if (t.value("single_word", false))
      fail("tokenizer.json: added token '{}' uses single_word=true, which is not supported", a.content);
    if (a.id < 0) fail("tokenizer.json: added token '{}' has a negative id", a.content);
    if (a.content.empty()) fail("tokenizer.json: added token with id {} has empty content", a.id);
    v.tokens_.push_back(std::move(a));
  }
  // The id HF assigns (AddedVocabulary::add_tokens) must be the declared one.
  std::unordered_map<std::string, int32_t> seen;
  int64_t max_added = -1;
  const int64_t n_vocab = int64_t(model.vocab_count());
  for (const AddedToken& a : v.tokens_) {
    int64_t want;
    if (auto it = seen.find(a.content); it != seen.end()) want = it->second;
    else if (int32_t m = model.token_to_id(a.content); m >= 0) want = m;
    else if (max_added < 0) want = n_vocab;
    else want = (max_added >= n_vocab || n_vocab == 0) ? max_added + 1 : n_vocab;
    if (want != a.id)
      fail("added token '{}' declares id {} but Hugging Face tokenizers would assign it id {} "
           "(ids must follow the vocabulary contiguously); refusing an ambiguous file", a.content, a.id, want);
    seen.emplace(a.content, a.id);
    max_added = std::max(max_added, int64_t(a.id));
  }
  for (size_t i = 0; i < v.tokens_.size(); ++i) {
    const AddedToken& a = v.tokens_[i];
    if (size_t(a.id) >= v.by_id_.size()) v.by_id_.resize(size_t(a.id) + 1, -1);
    v.by_id_[size_t(a.id)] = int32_t(i);
    if (a.normalized) {
      std::string n;
      norm.apply(a.content, n);
      if (!n.empty()) v.normalized_.add(n, int32_t(i));
    } else {
      v.raw_.add(a.content, int32_t(i));
    }
  }
  return v;
}

const AddedToken* AddedVocab::find_id(int32_t id) const {
  if (id < 0 || size_t(id) >= by_id_.size() || by_id_[size_t(id)] < 0) return nullptr;
  return &tokens_[size_t(by_id_[size_t(id)])];
}

int32_t AddedVocab::find_content(std::string_view content) const {
  for (const AddedToken& a : tokens_)
    if (a.content == content) return a.id;
  return -1;
}

void AddedVocab::split(std::string_view text, bool normalized_pass, std::vector<Segment>& out) const {
  const Trie& trie = normalized_pass ? normalized_ : raw_;
  size_t start_offset = 0;  // end of the previous emitted segment
  if (trie.nodes.size() > 1) {
    for (size_t i = 0; i < text.size();) {
      if (!trie.first[uint8_t(text[i])]) {
        ++i;
        continue;
      }
      const auto [tok, len] = trie.longest(text, i);
      if (tok < 0) {
        ++i;
        continue;
      }
      const AddedToken& a = tokens_[size_t(tok)];
      size_t start = i, stop = i + len;
      if (a.lstrip) {
        size_t s = start;
        while (s > start_offset) {  // step back over whitespace code points
          size_t b = s - 1;
          while (b > 0 && (uint8_t(text[b]) & 0xC0) == 0x80) --b;
          size_t k = b;
          if (!is_unicode_whitespace(utf8_next(text, k))) break;
          s = b;
        }
        start = s;
      }
      if (a.rstrip) {
        while (stop < text.size()) {
          size_t k = stop;
          if (!is_unicode_whitespace(utf8_next(text, k))) break;
          stop = k;
        }
      }
      if (start_offset < start) out.push_back({uint32_t(start_offset), uint32_t(start), -1});
      out.push_back({uint32_t(start), uint32_t(stop), a.id});
      start_offset = stop;
      i = stop;
    }
  }
  if (start_offset < text.size()) out.push_back({uint32_t(start_offset), uint32_t(text.size()), -1});
}

}  // namespace mmx::tok
