#include "grammar/token_masker.h"

#include <algorithm>
#include <limits>

#include "base/error.h"
#include "tokenizer/decoder.h"
#include "tokenizer/tokenizer.h"

namespace mmx::grammar {

namespace {
constexpr size_t kMaxCachedMasks = 256;  // x 25 KiB on a 200K vocabulary
}

VocabTrie::VocabTrie(const tok::Tokenizer& tok) {
  if (!tok.decoder_is_byte_level())
    fail("constrained decoding needs a byte-level tokenizer (this tokenizer's decoder is not ByteLevel)");
  n_vocab_ = tok.vocab_size();
  bytes_.resize(size_t(n_vocab_));
  std::vector<int32_t> order;
  std::string s;
  for (int32_t id = 0; id < n_vocab_; ++id) {
    if (!tok.has_id(id) || !tok.token_string(id, s)) continue;
    tok::Decoder::token_bytes(s, bytes_[size_t(id)]);
    if (tok.is_special(id)) special_.push_back(id);
    if (!bytes_[size_t(id)].empty()) order.push_back(id);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[size_t(a)] < bytes_[size_t(b)] || (bytes_[size_t(a)] == bytes_[size_t(b)] && a < b);
  });
  // Preorder build over the sorted strings: keep the open path; close nodes past the common prefix.
  std::vector<uint32_t> open;  // node index per depth - 1
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& b = bytes_[size_t(id)];
    size_t common = 0;
    if (prev)
      while (common < prev->size() && common < b.size() && (*prev)[common] == b[common]) ++common;
    common = std::min(common, open.size());
    while (open.size() > common) {
      nodes_[open.back()].end = uint32_t(nodes_.size());
      open.pop_back();
    }
    for (size_t k = common; k < b.size(); ++k) {
      open.push_back(uint32_t(nodes_.size()));
      nodes_.push_back({uint8_t(b[k]), uint16_t(std::min<size_t>(k + 1, UINT16_MAX)), 0, 0, 0});
    }
    Node& leaf = nodes_[open.back()];
    if (leaf.tok_end == leaf.tok_begin) leaf.tok_begin = leaf.tok_end = uint32_t(ids_.size());
    ids_.push_back(id);
    leaf.tok_end = uint32_t(ids_.size());
    max_depth_ = std::max(max_depth_, b.size());
    prev = &b;
  }
  while (!open.empty()) {
    nodes_[open.back()].end = uint32_t(nodes_.size());
    open.pop_back();
  }
  if (max_depth_ >= UINT16_MAX) fail("a token decodes to {} bytes; at most 65534 are supported", max_depth_);
}

TokenMasker::TokenMasker(std::shared_ptr<const VocabTrie> vocab, Grammar g, bool allow_special)
    : vocab_(std::move(vocab)), a_(std::move(g)), allow_special_(allow_special), start_(a_.start()) {
  path_.resize(vocab_->max_depth() + 1);
}

int32_t TokenMasker::advance(int32_t state, int32_t id) {
  std::lock_guard<std::mutex> l(mu_);
  if (id < 0 || id >= vocab_->n_vocab()) return Automaton::kDead;
  return a_.walk(state, vocab_->bytes(id));
}

bool TokenMasker::accepting(int32_t state) {
  std::lock_guard<std::mutex> l(mu_);
  return a_.accepting(state);
}

bool TokenMasker::finished(int32_t state) {
  std::lock_guard<std::mutex> l(mu_);
  return a_.finished(state);
}

uint32_t TokenMasker::dist(int32_t state) {
  std::lock_guard<std::mutex> l(mu_);
  return a_.dist(state);
}

TokenMasker::Stats TokenMasker::stats() {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

void TokenMasker::allowed(int32_t state, int64_t left, Bits& out) {
  std::lock_guard<std::mutex> l(mu_);
  ++stats_.asks;
  const auto it = cache_.find(state);
  if (it != cache_.end() && left - 1 >= int64_t(it->second.max_dist)) {
    ++stats_.cache_hits;
    out = it->second.bits;
    return;
  }
  if (it == cache_.end()) {  // walk unbudgeted, cache, and use it if the budget allows
    if (cache_.size() >= kMaxCachedMasks) cache_.clear();
    Cached c;
    walk(state, std::numeric_limits<int64_t>::max(), c.bits, c.max_dist);
    const bool fits = left - 1 >= int64_t(c.max_dist);
    const auto& ins = cache_.emplace(state, std::move(c)).first->second;
    if (fits) {
      out = ins.bits;
      return;
    }
  }
  uint32_t unused;
  walk(state, left, out, unused);
}

void TokenMasker::walk(int32_t state, int64_t left, Bits& out, uint32_t& max_dist) {
  ++stats_.walks;
  const VocabTrie& v = *vocab_;
  out.assign(size_t(v.n_vocab() + 63) / 64, 0);
  max_dist = 0;
  const auto& nodes = v.nodes();
  const auto& ids = v.ids();
  path_[0] = state;
  const size_t n = nodes.size();
  int64_t visited = 0;
  for (size_t i = 0; i < n;) {
    const VocabTrie::Node& nd = nodes[i];
    ++visited;
    const int32_t s = a_.next(path_[nd.depth - 1], nd.byte);
    if (s == Automaton::kDead) {
      i = nd.end;
      continue;
    }
    path_[nd.depth] = s;
    if (nd.tok_end > nd.tok_begin) {
      const uint32_t d = a_.dist(s);
      if (int64_t(d) <= left - 1) {
        for (uint32_t k = nd.tok_begin; k < nd.tok_end; ++k) out[size_t(ids[k]) >> 6] |= uint64_t(1) << (ids[k] & 63);
        max_dist = std::max(max_dist, d);
      }
    }
    ++i;
  }
  stats_.trie_nodes_visited += visited;
  if (!allow_special_)
    for (int32_t id : v.special_ids()) out[size_t(id) >> 6] &= ~(uint64_t(1) << (id & 63));
}

}  // namespace mmx::grammar
