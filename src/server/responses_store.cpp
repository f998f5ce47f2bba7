#include "server/responses_store.h"

namespace mmx::server {

void ResponseStore::put(const std::string& id, ojson conversation) {
  const size_t bytes = conversation.dump(-1, ' ', false, ojson::error_handler_t::replace).size();
  std::lock_guard<std::mutex> l(mu_);
  if (auto it = by_id_.find(id); it != by_id_.end()) {
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    by_id_.erase(it);
  }
  if (bytes > max_bytes_) return;  // larger than the whole store: not kept
  lru_.push_front({id, std::move(conversation), bytes});
  by_id_[id] = lru_.begin();
  bytes_ += bytes;
  evict_locked();
}

void ResponseStore::evict_locked() {
  while (!lru_.empty() && (lru_.size() > max_responses_ || bytes_ > max_bytes_)) {
    bytes_ -= lru_.back().bytes;
    by_id_.erase(lru_.back().id);
    lru_.pop_back();
  }
}

std::optional<ResponseStore::ojson> ResponseStore::conversation(const std::string& id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);  // used: now the most recent
  return it->second->items;
}

std::optional<ResponseStore::ojson> ResponseStore::item(const std::string& item_id) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto e = lru_.begin(); e != lru_.end(); ++e)
    for (const ojson& it : e->items)
      if (it.is_object() && it.contains("id") && it["id"] == item_id) {
        ojson found = it;
        lru_.splice(lru_.begin(), lru_, e);
        return found;
      }
  return std::nullopt;
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> l(mu_);
  return lru_.size();
}

}  // namespace mmx::server
