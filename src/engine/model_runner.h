// ModelRunner: a scheduled batch -> one fused Model::forward_multi over every chunk (the weights
// are read once per step) -> the logit rows each chunk needs: its last row when it reaches the end
// of its known tokens (1 + its drafts' rows when it carries drafts: speculative verification), none
// for a prompt chunk short of the end. Knows nothing of requests, sampling or memory policy; the
// chunks' caches are the sequences' own (reserved by the scheduler).
#pragma once

#include <vector>

#include "engine/scheduler.h"
#include "model/model.h"
#include "tensor/tensor.h"

namespace mmx {

class ModelRunner {
 public:
  explicit ModelRunner(Model& model) : model_(model) {}
  // logits: [rows, vocab] F32 (valid until the next run); chunk i's rows start at first_row(i).
  const Buffer& run(const ScheduledBatch& batch);
  int64_t first_row(size_t i) const { return first_row_[i]; }

 private:
  Model& model_;
  std::vector<int32_t> tokens_;
  std::vector<SeqChunk> chunks_;
  std::vector<int64_t> first_row_;
  Buffer logits_;
  int64_t rows_ = -1;  // logits_ holds [rows_, vocab]
};

}  // namespace mmx
