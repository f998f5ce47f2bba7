#include "grammar/constraint.h"

#include <limits>

namespace mmx::grammar {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void set_bit(Bits& b, int32_t id) { b[size_t(id) >> 6] |= uint64_t(1) << (id & 63); }
}  // namespace

void apply_mask(const Bits& bits, float* logits, int64_t n) {
  for (int64_t w = 0; w * 64 < n; ++w) {
    const uint64_t word = size_t(w) < bits.size() ? bits[size_t(w)] : 0;
    if (word == ~uint64_t(0)) continue;
    const int64_t end = std::min<int64_t>(n, (w + 1) * 64);
    for (int64_t i = w * 64; i < end; ++i)
      if (!(word >> (i & 63) & 1)) logits[i] = kNegInf;
  }
}

namespace {
// Every id but `id` gets -inf.
void force_only(float* logits, int64_t n, int32_t id) {
  const float keep = logits[id];
  for (int64_t i = 0; i < n; ++i) logits[i] = kNegInf;
  logits[id] = keep;
}
}  // namespace

void GateWatch::accept(int32_t id, const VocabTrie& vocab) {
  if (open_) return;
  if (id == gate_.id) {
    open_ = true;
    return;
  }
  ++before_;
  if (id >= 0 && id < vocab.n_vocab()) tail_ += vocab.bytes(id);
  const std::string& g = gate_.bytes;
  if (!g.empty() && tail_.size() >= g.size() && tail_.compare(tail_.size() - g.size(), g.size(), g) == 0) open_ = true;
  if (tail_.size() > 4 * g.size() + 64) tail_.erase(0, tail_.size() - g.size());
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<TokenMasker> masker, Gate gate)
    : m_(std::move(masker)), gate_(std::move(gate)), state_(m_->start()) {}

void GrammarConstraint::restrict(float* logits, int64_t n, int64_t left, std::span<const int32_t> stop_ids) {
  if (state_ == Automaton::kDead) return;  // a refused id slipped through (cannot happen): stop steering
  // The last token of the budget is kept for a stop id, so a complete reply ends as "stop".
  const int64_t content_left = left - 1;
  if (!gate_.open()) {
    // Writing the gate now leaves content_left - 1 tokens; the grammar needs dist(start) of them.
    if ((gate_.over_budget() || content_left - 1 <= int64_t(m_->dist(m_->start()))) && gate_.id() < n) {
      force_only(logits, n, gate_.id());
      return;
    }
    for (int32_t id : stop_ids)
      if (id >= 0 && id < n) logits[id] = kNegInf;
    return;
  }
  if (content_left >= 1) m_->allowed(state_, content_left, bits_);
  else bits_.assign(size_t(n + 63) / 64, 0);
  const bool may_end = m_->accepting(state_);
  bits_.resize(size_t(n + 63) / 64, 0);
  for (int32_t id : stop_ids)
    if (id >= 0 && id < n) {
      if (may_end) set_bit(bits_, id);
      else bits_[size_t(id) >> 6] &= ~(uint64_t(1) << (id & 63));
    }
  bool any = false;
  for (uint64_t w : bits_) any |= w != 0;
  if (!any)  // nothing fits (a vocabulary without single-byte tokens): let the sequence end
    for (int32_t id : stop_ids)
      if (id >= 0 && id < n) set_bit(bits_, id);
  apply_mask(bits_, logits, n);
}

void GrammarConstraint::accept(int32_t id) {
  if (state_ == Automaton::kDead) return;
  if (!gate_.open()) {
    gate_.accept(id, m_->vocab());
    return;
  }
  state_ = m_->advance(state_, id);
}

void ReasoningBudget::restrict(float* logits, int64_t n, int64_t /*left*/, std::span<const int32_t> /*stop_ids*/) {
  if (!gate_.open() && gate_.over_budget() && gate_.id() >= 0 && gate_.id() < n) force_only(logits, n, gate_.id());
}

void ReasoningBudget::accept(int32_t id) { gate_.accept(id, *vocab_); }

}  // namespace mmx::grammar
