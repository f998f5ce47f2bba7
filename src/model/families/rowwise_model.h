// RowwiseModel: the base of every family whose forward is row-wise except attention (all three).
// Both entry points become calls of run() over SeqRows — a single sequence is the one-chunk
// case — so each family writes its layer loop once, and never touches cache bookkeeping: this
// base advances the caches after each pass (KvCache::advance, which saves a lightning state
// checkpoint when due).
//
// The hybrid rule (memory decides, KvCache::max_chunk): a pass never crosses a state checkpoint
// (never an issue for models without lightning layers), so prefix resume and rollback land on
// exact states. forward_multi runs every chunk in fused rounds: each round takes from every
// unfinished chunk what its cache allows; one round when all chunks fit (the engine schedules
// them so), and a chunk's logits row comes from the round in which it ends.
#pragma once

#include <algorithm>
#include <cstring>
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
      const int64_t end = done + kv.max_chunk(n - done);
      const SeqChunk one{0, end - done, &kv};
      Tensor seg_logits = batch.all_logits ? logits.rows_range(done, end) : logits;
      run(batch.tokens.rows_range(done, end), {batch.positions.rows_range(done, end), {&one, 1}},
          batch.all_logits, end == n || batch.all_logits ? &seg_logits : nullptr);
      kv.advance(end - done);
      done = end;
    }
  }

  void forward_multi(const Tensor& tokens, std::span<const SeqChunk> chunks, Tensor& logits) final {
    check_forward_multi_args(config(), tokens, chunks, logits);
    std::vector<int64_t> done(chunks.size(), 0);
    for (;;) {
      round_.clear();
      round_tokens_.clear();
      which_.clear();
      for (size_t i = 0; i < chunks.size(); ++i) {
        const SeqChunk& c = chunks[i];
        if (done[i] == c.n) continue;
        const int64_t m = c.kv->max_chunk(c.n - done[i]);
        round_.push_back({int64_t(round_tokens_.size()), m, c.kv, c.logits && done[i] + m == c.n});
        const int32_t* t = tokens.ptr<int32_t>() + c.begin + done[i];
        round_tokens_.insert(round_tokens_.end(), t, t + m);
        which_.push_back(i);
        done[i] += m;
      }
      if (round_.empty()) return;
      const int64_t rows = int64_t(round_tokens_.size()), V = config().vocab_size;
      positions_.resize(size_t(rows));
      Tensor positions(positions_.data(), DType::kI32, {rows});  // [rows] I32
      fill_chunk_positions(round_, positions);
      const bool whole = round_.size() == chunks.size() &&
                         std::all_of(which_.begin(), which_.end(), [&](size_t i) { return done[i] == chunks[i].n; });
      if (whole) {  // the usual case: one round, logits straight into place
        run(tokens, {positions, round_}, false, &logits);
      } else {
        round_logits_.resize(round_.size() * size_t(V));
        Tensor rl(round_logits_.data(), DType::kF32, {int64_t(round_.size()), V});
        run(Tensor(round_tokens_.data(), DType::kI32, {rows}), {positions, round_}, false, &rl);
        for (size_t j = 0; j < round_.size(); ++j)
          if (done[which_[j]] == chunks[which_[j]].n)  // this chunk ends here: its row
            std::memcpy(logits.f32() + int64_t(which_[j]) * V, round_logits_.data() + j * size_t(V),
                        size_t(V) * sizeof(float));
      }
      for (const SeqChunk& c : round_) c.kv->advance(c.n);
      if (whole) return;
    }
  }

 protected:
  // Row-wise ops over all rows; attention per chunk against its own cache (at kv->n_past()).
  // Does not advance the caches. logits: every row (all_logits, one chunk only), the last row of
  // each chunk, or nullptr (none).
  virtual void run(const Tensor& tokens, const SeqRows& rows, bool all_logits, Tensor* logits) = 0;

 private:
  std::vector<int32_t> positions_, round_tokens_;
  std::vector<SeqChunk> round_;
  std::vector<size_t> which_;
  std::vector<float> round_logits_;
};

}  // namespace mmx
