#include "model/families/registry.h"

#include "base/error.h"

namespace mmx {

void validate_token_ids(const Tensor& tokens, int64_t vocab_size) {
  MMX_CHECK(tokens.dtype == DType::kI32, "token ids must be I32");
  const int32_t* p = tokens.ptr<int32_t>();
  for (int64_t i = 0; i < tokens.numel(); ++i)
    if (p[i] < 0 || p[i] >= vocab_size)
      fail("token id {} at index {} is outside the vocabulary [0, {})", p[i], i, vocab_size);
}

std::unique_ptr<Model> load_model(const std::string& dir, void (*progress)(int, int),
                                  const LoadOptions& opts) {
  ModelConfig cfg = load_config(dir);
  if (opts.lightning_block > 0) cfg.lightning_block = opts.lightning_block;
  ModelWeights w = load_weights(dir, cfg, progress);
  switch (cfg.family) {
    case Family::kMiniMaxM2: return make_minimax_m2(std::move(cfg), std::move(w));
    case Family::kMiniMaxText01: return make_minimax_text01(std::move(cfg), std::move(w));
    case Family::kMiniMaxM3: return make_minimax_m3(std::move(cfg), std::move(w));
  }
  fail("unsupported model family");
}

}  // namespace mmx
