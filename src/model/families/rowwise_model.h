// RowwiseModel: the base of every family whose forward is row-wise except attention (all three).
// Both entry points become calls of run() over SeqRows — a single sequence is the one-chunk
// case — so each family writes its layer loop once.
//
// The hybrid rule for lightning layers (DESIGN "hybrid"): a forward is split where the cache
// wants a state checkpoint (KvCache::next_checkpoint; never for models without lightning layers)
// and the checkpoint is saved there, so prefix resume and rollback land on exact states. A fused
// step whose chunks all stay within their next checkpoint (the engine schedules them so) runs in
// one pass; otherwise it falls back to one forward() per chunk.
#pragma once

#include <algorithm>
#include <span>
#include <vector>

#include "model/model.h"

namespace mmx {

class RowwiseModel : public Model {
 public:
  void forward(const ForwardBatch& batch, KvCache& kv, Tensor& logits) final {
    check_forward_args(config(), batch, kv, logits);
    const int64_t n = batch.n_tokens();
    for (int64_t done = 0; done < n;) {
      const int64_t end = std::min(n, kv.next_checkpoint(batch.pos0 + done) - batch.pos0);
      const SeqChunk one{0, end - done, &kv};
      Tensor seg_logits = batch.all_logits ? logits.rows_range(done, end) : logits;
      run(batch.tokens.rows_range(done, end), {batch.positions.rows_range(done, end), {&one, 1}},
          batch.all_logits, end == n || batch.all_logits ? &seg_logits : nullptr);
      save_checkpoint_if_due(kv);
      done = end;
    }
  }

  void forward_multi(const Tensor& tokens, std::span<const SeqChunk> chunks, Tensor& logits) final {
    check_forward_multi_args(config(), tokens, chunks, logits);
    if (chunks.empty()) return;
    for (const SeqChunk& c : chunks)
      if (c.kv->n_past() + c.n > c.kv->next_checkpoint(c.kv->n_past()))
        return Model::forward_multi(tokens, chunks, logits);  // crosses a state checkpoint
    positions_.resize(static_cast<size_t>(tokens.dim(0)));
    Tensor positions(positions_.data(), DType::kI32, {tokens.dim(0)});  // [n_rows] I32
    fill_chunk_positions(chunks, positions);
    run(tokens, {positions, chunks}, false, &logits);
    for (const SeqChunk& c : chunks) save_checkpoint_if_due(*c.kv);
  }

 protected:
  // Row-wise ops over all rows; attention per chunk against its own cache; advances each cache.
  // logits: every row (all_logits, one chunk only), the last row of each chunk, or nullptr (none).
  virtual void run(const Tensor& tokens, const SeqRows& rows, bool all_logits, Tensor* logits) = 0;

 private:
  static void save_checkpoint_if_due(KvCache& kv) {
    if (kv.checkpoint_every() > 0 && kv.has_states() && kv.n_past() % kv.checkpoint_every() == 0)
      kv.save_checkpoint();
  }
  std::vector<int32_t> positions_;
};

}  // namespace mmx
