#include "model/families/registry.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/error.h"

namespace mmx {

void validate_token_ids(const Tensor& tokens, int64_t vocab_size) {
  MMX_CHECK(tokens.dtype == DType::kI32, "token ids must be I32");
  const int32_t* p = tokens.ptr<int32_t>();
  for (int64_t i = 0; i < tokens.numel(); ++i)
    if (p[i] < 0 || p[i] >= vocab_size)
      fail("token id {} at index {} is outside the vocabulary [0, {})", p[i], i, vocab_size);
}

void check_forward_args(const ModelConfig& c, const ForwardBatch& batch, const KvCache& kv,
                        const Tensor& logits) {
  const int64_t n = batch.n_tokens();
  validate_token_ids(batch.tokens, c.vocab_size);
  if (batch.pos0 != kv.n_past())
    fail("batch starts at position {} but the cache holds {} tokens", batch.pos0, kv.n_past());
  if (batch.pos0 + n > kv.capacity())
    fail("context full: {} + {} tokens exceed the cache capacity {}", batch.pos0, n, kv.capacity());
  MMX_CHECK(logits.dim(0) == batch.n_logit_rows() && logits.dim(1) == c.vocab_size, "logits {}",
            logits.shape_str());
}

std::unique_ptr<Model> load_model(const std::string& dir, void (*progress)(int, int),
                                  const LoadOptions& opts) {
  ModelConfig cfg = load_config(dir);
  cfg.lightning_block = opts.lightning_block > 0 ? opts.lightning_block : std::min(cfg.lightning_block, 64);
  ModelWeights w = load_weights(dir, cfg, progress);
  if (cfg.family == Family::kMiniMaxM3) {  // the VL wrapper's non-text tensors (spec §5.9)
    int64_t n_vision = 0;
    for (const auto& name : w.store.names())
      n_vision += name.rfind("vision_tower.", 0) == 0 || name.rfind("multi_modal_projector.", 0) == 0 ||
                  name.rfind("patch_merge_mlp.", 0) == 0 || name.rfind("language_model.model.mtp.", 0) == 0;
    if (n_vision > 0)
      cfg.warnings.push_back(fmt::format("{}: {} vision-tower / projector / MTP tensors are not used (text "
                                         "backbone only)", dir, n_vision));
  }
  switch (cfg.family) {
    case Family::kMiniMaxM2: return make_minimax_m2(std::move(cfg), std::move(w));
    case Family::kMiniMaxText01: return make_minimax_text01(std::move(cfg), std::move(w));
    case Family::kMiniMaxM3: return make_minimax_m3(std::move(cfg), std::move(w));
  }
  fail("unsupported model family");
}

}  // namespace mmx
