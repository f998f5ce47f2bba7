// RowwiseModel: the base of families whose forward is row-wise except attention (M2, M3). Both
// entry points become one call of run() over SeqRows — a single sequence is the one-chunk case —
// so each family writes its layer loop once.
#pragma once

#include <span>
#include <vector>

#include "model/model.h"

namespace mmx {

class RowwiseModel : public Model {
 public:
  void forward(const ForwardBatch& batch, KvCache& kv, Tensor& logits) final {
    check_forward_args(config(), batch, kv, logits);
    const SeqChunk one{0, batch.n_tokens(), &kv};
    run(batch.tokens, {batch.positions, {&one, 1}}, batch.all_logits, logits);
  }

  void forward_multi(const Tensor& tokens, std::span<const SeqChunk> chunks, Tensor& logits) final {
    check_forward_multi_args(config(), tokens, chunks, logits);
    if (chunks.empty()) return;
    positions_.resize(static_cast<size_t>(tokens.dim(0)));
    Tensor positions(positions_.data(), DType::kI32, {tokens.dim(0)});  // [n_rows] I32
    fill_chunk_positions(chunks, positions);
    run(tokens, {positions, chunks}, false, logits);
  }

 protected:
  // Row-wise ops over all rows; attention per chunk against its own cache; advances each cache.
  // logits: every row (all_logits, one chunk only) or the last row of each chunk.
  virtual void run(const Tensor& tokens, const SeqRows& rows, bool all_logits, Tensor& logits) = 0;

 private:
  std::vector<int32_t> positions_;
};

}  // namespace mmx
