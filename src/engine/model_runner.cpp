#include "engine/model_runner.h"

namespace mmx {

const Buffer& ModelRunner::run(const ScheduledBatch& batch) {
  tokens_.clear();
  chunks_.clear();
  first_row_.clear();
  int64_t row = 0;
  for (const ScheduledChunk& c : batch.chunks) {
    const Sequence& s = *c.seq;
    const int64_t p0 = s.mem.n_past();
    // Logits only where a token is sampled next: the chunk reaches the end of the known tokens;
    // a drafted chunk wants the row of its last verified token and one per draft.
    const bool ends = p0 + c.n == int64_t(s.tokens.size());
    chunks_.push_back({int64_t(tokens_.size()), c.n, s.mem.kv.get(), ends ? std::min(c.n, 1 + s.n_draft) : 0});
    first_row_.push_back(row);
    row += logit_rows(chunks_.back());
    tokens_.insert(tokens_.end(), s.tokens.begin() + p0, s.tokens.begin() + p0 + c.n);
  }
  const int64_t V = model_.config().vocab_size;
  if (row != rows_) logits_ = Buffer(DType::kF32, {row, V}), rows_ = row;
  model_.forward_multi(Tensor(tokens_.data(), DType::kI32, {int64_t(tokens_.size())}), chunks_, logits_.t());
  return logits_;
}

}  // namespace mmx
