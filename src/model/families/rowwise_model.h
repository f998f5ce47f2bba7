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
// them so), and a chunk's logit rows come from the rounds that hold them.
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
          batch.all_logits, end == n || batch.all_logits ? &seg_logits : nullptr, nullptr);
      kv.advance(end - done);
      done = end;
    }
  }

  void forward_multi(const Tensor& tokens, std::span<const SeqChunk> chunks, Tensor& logits, Tensor* hidden) final {
    check_forward_multi_args(config(), tokens, chunks, logits, hidden);
    const int64_t V = config().vocab_size, d = config().d_model;
    offset_.assign(chunks.size(), 0);  // chunk i's first row in logits / hidden
    for (size_t i = 1; i < chunks.size(); ++i) offset_[i] = offset_[i - 1] + logit_rows(chunks[i - 1]);
    std::vector<int64_t> done(chunks.size(), 0);
    for (bool first = true;; first = false) {
      round_.clear();
      round_tokens_.clear();
      which_.clear();
      first_row_.clear();
      for (size_t i = 0; i < chunks.size(); ++i) {
        const SeqChunk& c = chunks[i];
        if (done[i] == c.n) continue;
        const int64_t m = c.kv->max_chunk(c.n - done[i]);
        // Of the chunk's logit rows [n - n_logits, n), those in this round's [done, done + m).
        const int64_t lo = std::max(done[i], c.n - c.n_logits), k = c.n_logits > 0 ? std::max<int64_t>(0, done[i] + m - lo) : 0;
        round_.push_back({int64_t(round_tokens_.size()), m, c.kv, k});
        const int32_t* t = tokens.ptr<int32_t>() + c.begin + done[i];
        round_tokens_.insert(round_tokens_.end(), t, t + m);
        which_.push_back(i);
        first_row_.push_back(lo - (c.n - c.n_logits));  // where they go among the chunk's rows
        done[i] += m;
      }
      if (round_.empty()) return;
      const int64_t rows = int64_t(round_tokens_.size());
      positions_.resize(size_t(rows));
      Tensor positions(positions_.data(), DType::kI32, {rows});  // [rows] I32
      fill_chunk_positions(round_, positions);
      const bool whole = first && round_.size() == chunks.size() &&
                         std::all_of(which_.begin(), which_.end(), [&](size_t i) { return done[i] == chunks[i].n; });
      if (whole) {  // the usual case: one round, logits straight into place
        for (size_t j = 0; j < round_.size(); ++j) round_[j].n_logits = chunks[j].n_logits;
        run(tokens, {positions, round_}, false, &logits, hidden);
      } else {  // rounds: into scratch, then each chunk's rows of this round copied into place
        const int64_t out = logit_rows(round_);
        round_logits_.resize(size_t(out * V));
        Tensor rl(round_logits_.data(), DType::kF32, {out, V});
        if (hidden) round_hidden_.resize(size_t(out * d));
        Tensor rh(round_hidden_.data(), DType::kF32, {out, d});
        run(Tensor(round_tokens_.data(), DType::kI32, {rows}), {positions, round_}, false, &rl, hidden ? &rh : nullptr);
        int64_t src = 0;
        for (size_t j = 0; j < round_.size(); ++j) {
          const size_t i = which_[j];
          // A chunk with no logits gets the NaN row of the round in which it ends.
          const int64_t k = round_[j].n_logits, copy = k > 0 ? k : (chunks[i].n_logits == 0 && done[i] == chunks[i].n);
          const int64_t dst = offset_[i] + (k > 0 ? first_row_[j] : 0);
          if (copy > 0) {
            std::memcpy(logits.f32() + dst * V, round_logits_.data() + src * V, size_t(copy * V) * sizeof(float));
            if (hidden) std::memcpy(hidden->f32() + dst * d, round_hidden_.data() + src * d, size_t(copy * d) * sizeof(float));
          }
          src += logit_rows(round_[j]);
        }
      }
      for (const SeqChunk& c : round_) c.kv->advance(c.n);
      if (whole) return;
    }
  }

 protected:
  // Row-wise ops over all rows; attention per chunk against its own cache (at kv->n_past()).
  // Does not advance the caches. logits: every row (all_logits, one chunk only), the last
  // n_logits rows of each chunk (layers::lm_head), or nullptr (none); hidden: the same rows of the
  // final-normed hidden state, or nullptr.
  virtual void run(const Tensor& tokens, const SeqRows& rows, bool all_logits, Tensor* logits, Tensor* hidden) = 0;

 private:
  std::vector<int32_t> positions_, round_tokens_;
  std::vector<SeqChunk> round_;
  std::vector<size_t> which_;
  std::vector<int64_t> offset_, first_row_;
  std::vector<float> round_logits_, round_hidden_;
};

}  // namespace mmx
