// Per-pre-token cache of BPE results: piece bytes -> ids. An open-addressing table (power-of-two
// slots, linear probing, the 64-bit hash stored per slot) over two flat arenas for keys and ids,
// so a hit costs one hash, about one cache line of probing and one memcmp. Bounded: stops
// inserting at max_entries (as HF's cache does).
// Thread-safety: none inside; the tokenizer takes `mu` with try_lock once per encode call and
// encodes uncached when another thread holds it, so concurrent encodes never wait.
#pragma once

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace mmx::tok {

class BpeCache {
 public:
  explicit BpeCache(size_t max_entries = 1 << 20) : max_entries_(max_entries) { slots_.resize(1 << 12); }

  // Returns true and appends the cached ids to `out` when `piece` is cached.
  bool lookup(std::string_view piece, std::vector<int32_t>& out) const {
    const uint64_t h = hash(piece);
    const size_t mask = slots_.size() - 1;
    for (size_t i = size_t(h) & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.key_len == kEmpty) return false;
      if (s.hash == h && s.key_len == piece.size() && std::memcmp(keys_.data() + s.key_off, piece.data(), piece.size()) == 0) {
        out.insert(out.end(), ids_.begin() + s.ids_off, ids_.begin() + s.ids_off + s.ids_len);
        return true;
      }
    }
  }
  void insert(std::string_view piece, const int32_t* ids, size_t n) {
    // Words, not bodies: a long piece is rarely seen twice, and caching it would keep its bytes
    // (and 4 bytes an id) for the life of the server.
    if (size_ >= max_entries_ || piece.size() > kMaxPieceBytes) return;
    if ((size_ + 1) * 2 > slots_.size()) grow();
    place(Slot{hash(piece), uint32_t(keys_.size()), uint32_t(piece.size()), uint32_t(ids_.size()), uint32_t(n)});
    keys_.append(piece);
    ids_.insert(ids_.end(), ids, ids + n);
    ++size_;
  }
  size_t size() const { return size_; }

  std::mutex mu;

 private:
  static constexpr uint32_t kEmpty = 0xFFFFFFFFu;
  static constexpr size_t kMaxPieceBytes = 256;
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_off = 0, key_len = kEmpty, ids_off = 0, ids_len = 0;
  };
  static uint64_t hash(std::string_view s) {
    // 8 bytes at a time, multiply-xorshift mixing; good enough for short words, and fast.
    uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
    }
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, s.size() - i);
    h = (h ^ w) * 0x94D049BB133111EBull;
    return h ^ (h >> 29);
  }
  void place(const Slot& s) {
    const size_t mask = slots_.size() - 1;
    size_t i = size_t(s.hash) & mask;
    while (slots_[i].key_len != kEmpty) i = (i + 1) & mask;
    slots_[i] = s;
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old)
      if (s.key_len != kEmpty) place(s);
  }

  size_t max_entries_, size_ = 0;
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> ids_;
};

}  // namespace mmx::tok
