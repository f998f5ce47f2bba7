// ModelRunner: a scheduled batch -> one fused Model::forward_multi over every chunk (the weights
// are read once per step) -> the last logits row of each chunk. Knows nothing of requests,
// sampling or memory policy; the chunks' caches are the sequences' own (reserved by the scheduler).
#pragma once

#include <vector>

#include "engine/scheduler.h"
#include "model/model.h"
#include "tensor/tensor.h"

namespace mmx {

class ModelRunner {
 public:
  explicit ModelRunner(Model& model) : model_(model) {}
  // logits: [batch.chunks.size(), vocab] F32, row i for chunk i (valid until the next run).
  const Buffer& run(const ScheduledBatch& batch);

 private:
  Model& model_;
  std::vector<int32_t> tokens_;
  std::vector<SeqChunk> chunks_;
  Buffer logits_;
  int64_t rows_ = -1;  // logits_ holds [rows_, vocab]
};

}  // namespace mmx
