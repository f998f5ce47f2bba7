// BPE model (see bpe.h).
#include "tokenizer/bpe.h"

#include "base/scratch.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

#include "base/error.h"
#include "tokenizer/unicode.h"

namespace mmx::tok {

using nlohmann::json;

namespace {
constexpr size_t kMaxCachedPiece = 256;  // bytes, as HF's MAX_LENGTH for its word cache

inline uint64_t hash_pair(uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) >> 20; }

// The raw bytes a byte-level token stands for, or false when it has a non-alphabet character.
bool token_bytes(std::string_view tok, std::string& out) {
  out.clear();
  size_t i = 0;
  if (!utf8_is_valid(tok)) return false;
  while (i < tok.size()) {
    const int b = codepoint_to_byte(utf8_next(tok, i));
    if (b < 0) return false;
    out.push_back(char(b));
  }
  return true;
}
}  // namespace

BpeModel BpeModel::from_json(const json& m, bool byte_level) {
  if (m.value("type", "BPE") != "BPE")
    fail("tokenizer.json: model type '{}' is not supported (only BPE)", m.value("type", ""));
  if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"].get<double>() != 0.0)
    fail("tokenizer.json: BPE dropout is not supported");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(k) && m[k].is_string() && !m[k].get<std::string>().empty())
      fail("tokenizer.json: BPE {} is not supported", k);

  BpeModel b;
  b.byte_level_ = byte_level;
  b.ignore_merges_ = m.value("ignore_merges", false);
  b.byte_fallback_ = m.value("byte_fallback", false);
  b.fuse_unk_ = m.value("fuse_unk", false);

  const json& vocab = m.at("vocab");
  int32_t max_id = -1;
  b.vocab_.reserve(vocab.size());
  // The id table is dense (id -> token): an id far past the entry count would make a huge table
  // from a small file, so ids must stay below entries + 2^20 (room for holes; real vocabularies
  // have none).
  const int64_t max_allowed = int64_t(vocab.size()) + (int64_t(1) << 20);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const json& v = it.value();
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= max_allowed)
      fail("tokenizer.json: token '{}' has id {}; ids must be integers in [0, {}) for a vocabulary of {} entries",
           it.key(), v.dump(), max_allowed, vocab.size());
    const int32_t id = int32_t(v.get<int64_t>());
    b.vocab_.emplace(it.key(), id);
    b.max_token_bytes_ = std::max(b.max_token_bytes_, it.key().size());
    max_id = std::max(max_id, id);
  }
  b.id_to_token_.assign(size_t(max_id + 1), std::string());
  for (const auto& [tok, id] : b.vocab_) b.id_to_token_[size_t(id)] = tok;

  if (byte_level) {
    std::string bytes;
    for (const auto& [tok, id] : b.vocab_)
      if (token_bytes(tok, bytes)) b.units_.emplace(bytes, id);
    const auto& alpha = byte_to_codepoint();
    for (int c = 0; c < 256; ++c) {
      std::string s;
      utf8_append(s, alpha[c]);
      auto it = b.vocab_.find(s);
      b.byte_ids_[c] = it == b.vocab_.end() ? -1 : it->second;
    }
  } else {
    b.units_ = b.vocab_;
    std::fill(std::begin(b.byte_ids_), std::end(b.byte_ids_), -1);
  }
  for (int c = 0; c < 256; ++c) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", c);
    b.byte_fallback_ids_[c] = b.token_to_id(name);
  }
  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    const std::string unk = m["unk_token"].get<std::string>();
    b.unk_id_ = b.token_to_id(unk);
    if (b.unk_id_ < 0) fail("tokenizer.json: unk_token '{}' is not in the vocabulary", unk);
  }

  const json& merges = m.at("merges");
  size_t cap = 16;
  while (cap < merges.size() * 2) cap <<= 1;
  b.merge_keys_.assign(cap, 0);
  b.merge_vals_.assign(cap, -1);
  b.merge_mask_ = cap - 1;
  std::string left, right;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& e = merges[rank];
    if (e.is_string()) {
      const std::string& s = e.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        fail("tokenizer.json: merge #{} '{}' is not 'a b'", rank, s);
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2) {
      left = e[0].get<std::string>();
      right = e[1].get<std::string>();
    } else {
      fail("tokenizer.json: merge #{} is neither 'a b' nor [a, b]", rank);
    }
    const int32_t a = b.token_to_id(left), c = b.token_to_id(right), n = b.token_to_id(left + right);
    if (a < 0 || c < 0) fail("tokenizer.json: merge #{} uses a token missing from the vocabulary ('{}' '{}')", rank, left, right);
    if (n < 0) fail("tokenizer.json: merge #{} result '{}' is not in the vocabulary", rank, left + right);
    const uint64_t key = ((uint64_t(uint32_t(a)) << 32) | uint32_t(c)) + 1;
    uint64_t h = hash_pair(key) & b.merge_mask_;
    while (b.merge_keys_[h] != 0 && b.merge_keys_[h] != key) h = (h + 1) & b.merge_mask_;
    if (b.merge_keys_[h] == key) continue;  // duplicate pair: the first (lower) rank wins
    b.merge_keys_[h] = key;
    b.merge_vals_[h] = (int64_t(rank) << 32) | uint32_t(n);
  }
  return b;
}

int32_t BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || size_t(id) >= id_to_token_.size() || id_to_token_[size_t(id)].empty()) return nullptr;
  return &id_to_token_[size_t(id)];
}

int64_t BpeModel::merge_lookup(int32_t a, int32_t b) const {
  const uint64_t key = ((uint64_t(uint32_t(a)) << 32) | uint32_t(b)) + 1;
  uint64_t h = hash_pair(key) & merge_mask_;
  while (true) {
    const uint64_t k = merge_keys_[h];
    if (k == key) return merge_vals_[h];
    if (k == 0) return -1;
    h = (h + 1) & merge_mask_;
  }
}

void BpeModel::units_bytes(std::string_view piece, std::vector<Sym>& syms) const {
  for (size_t i = 0; i < piece.size(); ++i) {
    const int32_t id = byte_ids_[uint8_t(piece[i])];
    if (id < 0) fail("tokenizer.json: byte-level vocabulary lacks the alphabet character for byte 0x{:02X}", uint8_t(piece[i]));
    syms.push_back({id, int32_t(syms.size()) - 1, int32_t(syms.size()) + 1, 1});
  }
}

void BpeModel::units_chars(std::string_view piece, std::vector<Sym>& syms) const {
  int32_t pending_unk_len = 0;  // > 0: an unk symbol is being built (fuse_unk)
  auto add = [&](int32_t id, int32_t len) { syms.push_back({id, int32_t(syms.size()) - 1, int32_t(syms.size()) + 1, len}); };
  auto flush_unk = [&] {
    if (pending_unk_len) add(unk_id_, pending_unk_len), pending_unk_len = 0;
  };
  size_t i = 0;
  while (i < piece.size()) {
    const size_t start = i;
    utf8_next(piece, i);
    const std::string_view ch = piece.substr(start, i - start);
    auto it = units_.find(ch);
    if (it != units_.end()) {
      flush_unk();
      add(it->second, int32_t(ch.size()));
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char c : ch) all = all && byte_fallback_ids_[uint8_t(c)] >= 0;
      if (all) {
        flush_unk();
        for (char c : ch) add(byte_fallback_ids_[uint8_t(c)], 1);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (pending_unk_len && !fuse_unk_) flush_unk();
      pending_unk_len += int32_t(ch.size());
    }
  }
  flush_unk();
}

void BpeModel::merge(std::vector<Sym>& syms) const {
  struct Cand {
    int64_t rank_new;  // rank << 32 | new_id
    int32_t pos;
    bool operator>(const Cand& o) const {
      const int64_t r = rank_new >> 32, ro = o.rank_new >> 32;
      return r != ro ? r > ro : pos > o.pos;
    }
  };
  thread_local std::vector<Cand> heap;
  heap.clear();
  const int32_t n = int32_t(syms.size());
  syms.back().next = -1;
  for (int32_t i = 0; i + 1 < n; ++i)
    if (int64_t v = merge_lookup(syms[i].id, syms[i + 1].id); v >= 0) heap.push_back({v, i});
  std::make_heap(heap.begin(), heap.end(), std::greater<>());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Cand top = heap.back();
    heap.pop_back();
    Sym& s = syms[top.pos];
    if (s.len == 0 || s.next < 0) continue;
    Sym& r = syms[s.next];
    if (merge_lookup(s.id, r.id) != top.rank_new) continue;  // stale candidate
    s.id = int32_t(uint32_t(top.rank_new & 0xFFFFFFFF));
    s.len += r.len;
    r.len = 0;
    s.next = r.next;
    if (s.next >= 0) syms[s.next].prev = top.pos;
    if (s.prev >= 0)
      if (int64_t v = merge_lookup(syms[s.prev].id, s.id); v >= 0) {
        heap.push_back({v, s.prev});
        std::push_heap(heap.begin(), heap.end(), std::greater<>());
      }
    if (s.next >= 0)
      if (int64_t v = merge_lookup(s.id, syms[s.next].id); v >= 0) {
        heap.push_back({v, top.pos});
        std::push_heap(heap.begin(), heap.end(), std::greater<>());
      }
  }
  release_if_large(heap);
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>& out, BpeCache* cache) const {
  if (piece.empty()) return;
  if (byte_level_ && piece.size() == 1) {
    out.push_back(byte_ids_[uint8_t(piece[0])]);
    return;
  }
  if (piece.size() > kMaxCachedPiece) cache = nullptr;  // long runs are rare: keep the cache small
  if (cache && cache->lookup(piece, out)) return;  // holds ignore_merges hits too
  if (ignore_merges_) {
    auto it = units_.find(piece);
    if (it != units_.end()) {
      out.push_back(it->second);
      if (cache) cache->insert(piece, &it->second, 1);
      return;
    }
  }
  thread_local std::vector<Sym> syms;
  syms.clear();
  if (byte_level_) units_bytes(piece, syms);
  else units_chars(piece, syms);
  if (syms.empty()) return;
  merge(syms);
  const size_t first = out.size();
  for (int32_t i = 0; i >= 0; i = syms[size_t(i)].next) out.push_back(syms[size_t(i)].id);
  if (cache) cache->insert(piece, out.data() + first, out.size() - first);
  release_if_large(syms);  // a 2 MB one-word body would otherwise stay with this (HTTP) thread
}

}  // namespace mmx::tok
