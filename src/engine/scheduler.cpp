#include "engine/scheduler.h"

#include <algorithm>

#include "base/error.h"

namespace mmx {

int64_t ScheduledBatch::n_tokens() const {
  int64_t n = 0;
  for (const ScheduledChunk& c : chunks) n += c.n;
  return n;
}

Scheduler::Scheduler(PagedMemory& mem, SchedulerOptions o) : mem_(mem), o_(o) {
  MMX_CHECK(o_.max_batch_tokens >= 1 && o_.max_running >= 1, "scheduler options");
}

void Scheduler::enqueue(std::unique_ptr<Sequence> s) { waiting_.push_back(std::move(s)); }

void Scheduler::remove(uint64_t id) {
  auto match = [id](const std::unique_ptr<Sequence>& s) { return s->id == id; };
  if (auto it = std::find_if(running_.begin(), running_.end(), match); it != running_.end()) {
    mem_.release((*it)->mem);
    running_.erase(it);
  }
  if (auto it = std::find_if(waiting_.begin(), waiting_.end(), match); it != waiting_.end()) {
    mem_.release((*it)->mem);
    waiting_.erase(it);
  }
}

int64_t Scheduler::retire_finished() {
  std::erase_if(running_, [](const std::unique_ptr<Sequence>& s) { return !s->mem.kv; });
  return int64_t(running_.size());
}

void Scheduler::requeue_running() {
  retire_finished();
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    mem_.release((*it)->mem);
    (*it)->drop_drafts((*it)->n_draft);
    waiting_.push_front(std::move(*it));
  }
  running_.clear();
}

// True if a running sequence is still prefilling tokens that s shares with it, beyond what s
// already found in the prefix cache: waiting for them to be committed beats computing them twice
// (n > 1 choices of one prompt, a burst of agent requests with one long system prompt).
bool Scheduler::shares_inflight_prefill(const Sequence& s, int64_t hit) const {
  for (const auto& q : running_) {
    if (q->pending() <= 1 + q->n_draft) continue;  // decoding: everything it shares is committed
    const auto end = s.tokens.begin() + int64_t(std::min(s.tokens.size(), q->tokens.size()));
    const int64_t common = std::mismatch(s.tokens.begin(), end, q->tokens.begin()).first - s.tokens.begin();
    if (mem_.usable_prefix(common, int64_t(s.tokens.size())) > hit) return true;
  }
  return false;
}

// Running sequences per client (GenRequest::client).
std::unordered_map<std::string, int64_t> Scheduler::running_per_client() const {
  std::unordered_map<std::string, int64_t> n;
  for (const auto& s : running_) ++n[s->in.client];
  return n;
}

// The newest running sequence of the client holding the most, if that client holds at least two
// more than `held` (what the waiting candidate's client holds): moving one slot from it to the
// candidate narrows the gap without reversing it, so fair preemption never ping-pongs.
Sequence* Scheduler::fairness_victim(int64_t held) const {
  const auto n = running_per_client();
  const std::string* most = nullptr;
  int64_t most_n = 0;
  for (const auto& [client, k] : n)
    if (k > most_n) most_n = k, most = &client;
  if (!most || most_n < held + 2) return nullptr;
  for (auto it = running_.rbegin(); it != running_.rend(); ++it)
    if ((*it)->in.client == *most) return it->get();
  return nullptr;
}

void Scheduler::admit() {
  ScheduledBatch none;  // nothing is planned yet: a fair preemption has no chunk to take back
  for (size_t guard = 0; !waiting_.empty() && guard < 4 * size_t(o_.max_running) + waiting_.size(); ++guard) {
    // The candidate: the first waiting sequence of the client with the fewest running ones (FIFO
    // among equals: with a single client — the CLI, RL rollouts — plain FIFO).
    const auto held_by = running_per_client();
    auto held = [&](const Sequence& q) {
      const auto it = held_by.find(q.in.client);
      return it == held_by.end() ? int64_t(0) : it->second;
    };
    size_t pick = 0;
    for (size_t i = 1; i < waiting_.size() && held(*waiting_[pick]) > 0; ++i)
      if (held(*waiting_[i]) < held(*waiting_[pick])) pick = i;
    Sequence& s = *waiting_[pick];
    const int64_t mine = held(s);
    if (int64_t(running_.size()) >= o_.max_running) {
      Sequence* victim = fairness_victim(mine);
      if (!victim) return;
      preempt(*victim, none);  // a client over its share gives a slot to one under it
      continue;
    }
    const int64_t hit = mem_.open(s.mem, s.tokens);
    // Room for the rest of its prompt plus a page of headroom per running sequence; the first
    // sequence always goes in (any request fits the whole pool: Engine::context_limit()).
    const bool room =
        running_.empty() || mem_.fit(s.mem) >= s.pending() + int64_t(running_.size()) * mem_.page();
    if (!room || shares_inflight_prefill(s, hit)) {
      mem_.release(s.mem);
      Sequence* victim = room ? nullptr : fairness_victim(mine);
      if (!victim) return;  // later sequences wait behind it
      preempt(*victim, none);  // pages, as slots: from the client over its share
      continue;
    }
    if (s.n_cached < 0) s.n_cached = hit;  // a recompute after preemption is not a cache hit
    prefix_hit_tokens_ += hit;
    prefix_lookup_tokens_ += int64_t(s.tokens.size());
    running_.push_back(std::move(waiting_[pick]));
    waiting_.erase(waiting_.begin() + int64_t(pick));
  }
}

void Scheduler::preempt(Sequence& victim, ScheduledBatch& batch) {
  mem_.release(victim.mem);
  victim.drop_drafts(victim.n_draft);  // recomputed from its verified tokens
  std::erase_if(batch.chunks, [&](const ScheduledChunk& c) { return c.seq == &victim; });
  auto it = std::find_if(running_.begin(), running_.end(), [&](auto& p) { return p.get() == &victim; });
  waiting_.push_front(std::move(*it));
  running_.erase(it);
  ++preemptions_;
}

// Gets pages for up to n tokens of s (n shrinks to what fits), preempting the most recently
// admitted sequences while nothing fits. False if s itself had to go.
bool Scheduler::make_room(Sequence& s, int64_t& n, ScheduledBatch& batch) {
  for (;;) {
    const int64_t fit = mem_.fit(s.mem);
    if (fit >= 1) {
      n = std::min(n, fit);
      mem_.reserve(s.mem, n);
      return true;
    }
    Sequence& victim = *running_.back();
    preempt(victim, batch);
    if (&victim == &s) return false;
  }
}

int64_t Scheduler::n_decoding() const {
  return std::count_if(running_.begin(), running_.end(), [](const auto& s) { return s->decoding(); });
}

int64_t Scheduler::n_starting() const {
  const int64_t prefilling =
      std::count_if(running_.begin(), running_.end(), [](const auto& s) { return s->mem.kv && !s->decoding(); });
  const int64_t free_slots = std::max<int64_t>(0, o_.max_running - int64_t(running_.size()));
  return prefilling + std::min<int64_t>(free_slots, int64_t(waiting_.size()));
}

ScheduledBatch Scheduler::schedule(int64_t prefill_budget) {
  admit();
  ScheduledBatch batch;
  int64_t prefill_used = 0;
  // Decodes first, then prefill chunks. Iterate over a snapshot: preemption edits running_.
  for (bool decodes : {true, false}) {
    std::vector<Sequence*> order;
    for (auto& s : running_) order.push_back(s.get());
    for (Sequence* s : order) {
      // Tokens left in this step (a preempted sequence's chunk leaves the batch and gives them back).
      int64_t left = o_.max_batch_tokens - batch.n_tokens();
      if (!decodes) left = std::min(left, prefill_budget - prefill_used);
      if (left <= 0) break;
      if (!s->mem.kv || s->decoding() != decodes) continue;  // (preempted in this loop)
      int64_t n = s->mem.kv->max_chunk(std::min(left, s->pending()));  // the hybrid rule: memory's
      if (make_room(*s, n, batch)) {
        batch.chunks.push_back({s, n});
        if (!decodes) prefill_used += n;
      }
    }
  }
  return batch;
}

}  // namespace mmx
