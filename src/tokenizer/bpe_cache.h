// Per-pre-token cache of BPE results: piece bytes -> ids. Bounded (stops inserting when full, as
// HF does). Thread-safety: the tokenizer takes `mu` with try_lock once per encode call and
// encodes uncached when another thread holds it, so concurrent encodes never wait.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mmx::tok {

class BpeCache {
 public:
  explicit BpeCache(size_t max_entries = 1 << 20) : max_entries_(max_entries) {}

  // Returns true and appends the cached ids to `out` when `piece` is cached.
  bool lookup(std::string_view piece, std::vector<int32_t>& out) const {
    auto it = map_.find(piece);
    if (it == map_.end()) return false;
    out.insert(out.end(), ids_.begin() + it->second.first, ids_.begin() + it->second.first + it->second.second);
    return true;
  }
  void insert(std::string_view piece, const int32_t* ids, size_t n) {
    if (map_.size() >= max_entries_) return;
    map_.emplace(std::string(piece), std::make_pair(uint32_t(ids_.size()), uint32_t(n)));
    ids_.insert(ids_.end(), ids, ids + n);
  }
  size_t size() const { return map_.size(); }

  std::mutex mu;

 private:
  struct Transparent {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    bool operator()(std::string_view a, std::string_view b) const { return a == b; }
  };
  size_t max_entries_;
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, Transparent, Transparent> map_;  // (offset, len)
  std::vector<int32_t> ids_;
};

}  // namespace mmx::tok
