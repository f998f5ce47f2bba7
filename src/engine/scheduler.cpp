// The engine's scheduling half (DESIGN data-flow step 4): admission with a prefix-cache match,
// the per-step token budget (decodes first, then prefill chunks), and preemption by recompute
// when pages run out. Everything here runs on the engine thread inside step().
#include <algorithm>

#include "engine/engine.h"
#include "engine/request.h"

namespace mmx {

// True if a running request is still prefilling tokens that r shares with it, beyond what r
// already found in the prefix cache: waiting for them to be committed beats computing them twice
// (n > 1 choices of one prompt, a burst of agent requests with one long system prompt).
bool Engine::shares_inflight_prefill(const Req& r, int64_t hit) const {
  for (const auto& q : running_) {
    if (q->pending() <= 1) continue;  // decoding: everything it shares is committed
    const auto end = r.tokens.begin() + int64_t(std::min(r.tokens.size(), q->tokens.size()));
    const int64_t common = std::mismatch(r.tokens.begin(), end, q->tokens.begin()).first - r.tokens.begin();
    if (mem_->usable_prefix(common, int64_t(r.tokens.size())) > hit) return true;
  }
  return false;
}

void Engine::admit() {
  while (!waiting_.empty() && int64_t(running_.size()) < opts_.max_running) {
    Req& r = *waiting_.front();
    const int64_t hit = mem_->open(r.mem, r.tokens);
    // Room for the rest of its prompt plus a page of headroom per running sequence; the first
    // request always goes in (any request fits the whole pool: context_limit()).
    const bool room =
        running_.empty() || mem_->fit(r.mem) >= r.pending() + int64_t(running_.size()) * mem_->page();
    if (!room || shares_inflight_prefill(r, hit)) {
      mem_->release(r.mem);
      break;  // FIFO: later requests wait behind it
    }
    if (r.n_cached < 0) r.n_cached = hit;  // a recompute after preemption is not a cache hit
    prefix_hit_tokens_ += hit;
    prefix_lookup_tokens_ += int64_t(r.tokens.size());
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

void Engine::preempt(Req& victim, std::vector<Item>& batch) {
  mem_->release(victim.mem);
  batch.erase(std::remove_if(batch.begin(), batch.end(), [&](const Item& it) { return it.r == &victim; }),
              batch.end());
  auto it = std::find_if(running_.begin(), running_.end(), [&](auto& p) { return p.get() == &victim; });
  waiting_.push_front(std::move(*it));
  running_.erase(it);
  ++preemptions_;
}

// Gets pages for up to n tokens of r (n shrinks to what fits), preempting the most recently
// admitted sequences while nothing fits. False if r itself had to go.
bool Engine::make_room(Req& r, int64_t& n, std::vector<Item>& batch) {
  for (;;) {
    const int64_t fit = mem_->fit(r.mem);
    if (fit >= 1) {
      n = std::min(n, fit);
      mem_->reserve(r.mem, n);
      return true;
    }
    Req& victim = *running_.back();
    preempt(victim, batch);
    if (&victim == &r) return false;
  }
}

std::vector<Engine::Item> Engine::schedule() {
  std::vector<Item> batch;
  // Tokens left in this step (a preempted sequence's chunk leaves the batch and gives them back).
  auto budget = [&] {
    int64_t used = 0;
    for (const Item& it : batch) used += it.n;
    return opts_.max_batch_tokens - used;
  };
  // Decodes first, then prefill chunks. Iterate over a snapshot: preemption edits running_.
  for (bool decodes : {true, false}) {
    std::vector<Req*> order;
    for (auto& r : running_) order.push_back(r.get());
    for (Req* r : order) {
      const int64_t left = budget();
      if (left <= 0) break;
      if ((r->pending() == 1) != decodes || !r->mem.kv) continue;  // (preempted in this loop)
      // A chunk ends at the next lightning-state checkpoint (none without lightning layers), so
      // the fused forward never has to split a sequence.
      const KvCache& kv = *r->mem.kv;
      int64_t n = std::min({left, r->pending(), kv.next_checkpoint(kv.n_past()) - kv.n_past()});
      if (make_room(*r, n, batch)) batch.push_back({r, n});
    }
  }
  return batch;
}

}  // namespace mmx
