// The responses a /v1/responses request asked to keep (`store`, the API's default), so that a
// later request can continue one (`previous_response_id`) or name one of its items
// (`item_reference`, as the AI SDK sends for the reasoning and text it got back).
//
//   put(id, conversation)   conversation: the whole item list of that turn in input-item form
//                           (the previous turn's items, this request's input, this response's
//                           output), so a chain never depends on an older entry still being here
//   conversation(id)        that list, or nothing when unknown or evicted
//   item(item_id)           one item of any kept conversation
//
// Bounded: at most max_responses entries and max_bytes of item JSON (the least recently used go
// first). Kept in memory only: a restart forgets everything, and the route says so in its 400.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>

namespace mmx::server {

class ResponseStore {
 public:
  using ojson = nlohmann::ordered_json;
  explicit ResponseStore(size_t max_responses = 256, size_t max_bytes = size_t(64) << 20)
      : max_responses_(max_responses), max_bytes_(max_bytes) {}

  void put(const std::string& id, ojson conversation);
  std::optional<ojson> conversation(const std::string& id);
  std::optional<ojson> item(const std::string& item_id);
  size_t size() const;

 private:
  struct Entry {
    std::string id;
    ojson items;
    size_t bytes = 0;
  };
  void evict_locked();
  size_t max_responses_, max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> by_id_;
  size_t bytes_ = 0;
};

}  // namespace mmx::server
