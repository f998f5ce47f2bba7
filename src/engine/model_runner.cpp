#include "engine/model_runner.h"

namespace mmx {

const Buffer& ModelRunner::run(const ScheduledBatch& batch) {
  tokens_.clear();
  chunks_.clear();
  for (const ScheduledChunk& c : batch.chunks) {
    const Sequence& s = *c.seq;
    const int64_t p0 = s.mem.n_past();
    // Logits only where a token is sampled next: the chunk reaches the end of the known tokens.
    chunks_.push_back({int64_t(tokens_.size()), c.n, s.mem.kv.get(), p0 + c.n == int64_t(s.tokens.size())});
    tokens_.insert(tokens_.end(), s.tokens.begin() + p0, s.tokens.begin() + p0 + c.n);
  }
  const int64_t rows = int64_t(batch.chunks.size()), V = model_.config().vocab_size;
  if (rows != rows_) logits_ = Buffer(DType::kF32, {rows, V}), rows_ = rows;
  model_.forward_multi(Tensor(tokens_.data(), DType::kI32, {int64_t(tokens_.size())}), chunks_, logits_.t());
  return logits_;
}

}  // namespace mmx
