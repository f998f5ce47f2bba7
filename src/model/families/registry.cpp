// The family registry: the checks every family's forward shares (token ids, batch and chunk
// shapes), and load_model(), which picks the family file by ModelConfig::family.
#include "model/families/registry.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "model/schema.h"
#include "ops/ops.h"

namespace mmx {

// ---- the family table ----
// Each family file defines its two entry points (families/minimax_<family>.cpp).
namespace config_parse {
void parse_config_m2(const json& j, const std::string& where, ModelConfig& c);
void parse_config_text01(const json& j, const std::string& where, ModelConfig& c);
void parse_config_m3(const json& j, const std::string& where, ModelConfig& c);
}  // namespace config_parse
std::unique_ptr<Model> make_minimax_m2(ModelConfig cfg, ModelWeights weights);
std::unique_ptr<Model> make_minimax_text01(ModelConfig cfg, ModelWeights weights);
std::unique_ptr<Model> make_minimax_m3(ModelConfig cfg, ModelWeights weights);

namespace {
const FamilyInfo kFamilies[] = {
    {Family::kMiniMaxM2, {"MiniMaxM2ForCausalLM"}, config_parse::parse_config_m2, make_minimax_m2},
    {Family::kMiniMaxText01, {"MiniMaxText01ForCausalLM", "MiniMaxM1ForCausalLM", "MiniMaxForCausalLM"},
     config_parse::parse_config_text01, make_minimax_text01},
    {Family::kMiniMaxM3, {"MiniMaxM3SparseForConditionalGeneration"}, config_parse::parse_config_m3, make_minimax_m3},
};
}  // namespace

const FamilyInfo* find_family(const std::string& architecture) {
  for (const FamilyInfo& f : kFamilies)
    if (std::find(f.architectures.begin(), f.architectures.end(), architecture) != f.architectures.end()) return &f;
  return nullptr;
}

std::string supported_architectures() {
  std::vector<std::string> all;
  for (const FamilyInfo& f : kFamilies) all.insert(all.end(), f.architectures.begin(), f.architectures.end());
  return fmt::format("{}", fmt::join(all, ", "));
}

// ---- checks every family's forward shares ----
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

void check_forward_multi_args(const ModelConfig& c, const Tensor& tokens, std::span<const SeqChunk> chunks,
                              const Tensor& logits, const Tensor* hidden) {
  MMX_CHECK(tokens.ndim == 1, "tokens {}", tokens.shape_str());
  validate_token_ids(tokens, c.vocab_size);
  int64_t next = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const SeqChunk& ch = chunks[i];
    if (ch.begin != next || ch.n < 1)
      fail("chunk {} covers rows [{}, {}) but must start at row {} and hold >= 1 token", i, ch.begin,
           ch.begin + ch.n, next);
    if (ch.kv == nullptr) fail("chunk {} has no cache", i);
    if (ch.n_logits < 0 || ch.n_logits > ch.n)
      fail("chunk {} asks for logits of its last {} rows but holds {}", i, ch.n_logits, ch.n);
    for (size_t j = 0; j < i; ++j)
      if (chunks[j].kv == ch.kv) fail("chunks {} and {} share one cache", j, i);
    if (ch.kv->n_past() + ch.n > ch.kv->capacity())
      fail("context full: chunk {}: {} + {} tokens exceed the cache capacity {}", i, ch.kv->n_past(), ch.n,
           ch.kv->capacity());
    next = ch.begin + ch.n;
  }
  if (next != tokens.dim(0)) fail("chunks cover {} rows of {} tokens", next, tokens.dim(0));
  const int64_t rows = logit_rows(chunks);
  MMX_CHECK(logits.ndim == 2 && logits.dim(0) == rows && logits.dim(1) == c.vocab_size,
            "logits {} for {} logit rows", logits.shape_str(), rows);
  MMX_CHECK(!hidden || (hidden->ndim == 2 && hidden->dim(0) == rows && hidden->dim(1) == c.d_model),
            "hidden {} for {} logit rows", hidden->shape_str(), rows);
}

void fill_chunk_positions(std::span<const SeqChunk> chunks, Tensor& positions) {
  int32_t* p = positions.ptr<int32_t>();
  for (const SeqChunk& ch : chunks)
    for (int64_t i = 0; i < ch.n; ++i) p[ch.begin + i] = int32_t(ch.kv->n_past() + i);
}

namespace {
// LoadOptions::lm_head_dtype: the lm_head dequantized and re-encoded in chunks of rows into a copy
// the weights own (the original is not read again, and released when in huge pages).
void reencode_lm_head(ModelWeights& w, DType t) {
  ops::Linear& h = w.lm_head;
  const int64_t V = h.n_out(), d = h.n_in();
  if (d % dtype_block(t) != 0)
    fail("--lm-head-type {}: the lm_head's rows of {} are not a multiple of its block of {}", dtype_name(t), d, dtype_block(t));
  const int64_t chunk = std::max<int64_t>(1, (int64_t(1) << 20) / d);
  Buffer out(t, {V, d}), f32(DType::kF32, {std::min(chunk, V), d});
  for (int64_t r0 = 0; r0 < V; r0 += chunk) {
    const int64_t n = std::min(chunk, V - r0);
    Tensor x = f32.t().rows_range(0, n), q = out.t().rows_range(r0, r0 + n);
    ops::linear_dequant_rows(h, r0, x);
    ops::quantize(x, q);
  }
  // The original's bytes are not read again (unless the embedding shares them): in huge pages,
  // give them back (the BF16 head of an FP8 checkpoint is 1.2 GB of RSS otherwise).
  if (h.w.data != w.embed.data) w.store.release(h.w.data, h.w.size_bytes());
  h = ops::Linear{};  // no block scales: the new type carries its own
  h.w = out.t();
  w.owned.insert(h.w.data);
  w.copies.push_back(std::move(out));
}
}  // namespace

// config.json -> ModelConfig, the checked weights (LoadOptions applied), the family's Model.
std::unique_ptr<Model> load_model(const std::string& dir, void (*progress)(int, int),
                                  const LoadOptions& opts) {
  ModelConfig cfg = load_config(dir);
  cfg.lightning_block = opts.lightning_block > 0 ? opts.lightning_block : std::min(cfg.lightning_block, 64);
  ModelWeights w = load_weights(dir, cfg, progress, !opts.mmap_weights);
  if (opts.lm_head_dtype) reencode_lm_head(w, *opts.lm_head_dtype);
  if (cfg.family == Family::kMiniMaxM3) {  // the VL wrapper's non-text tensors (spec §5.9)
    int64_t n_vision = 0;
    for (const auto& name : w.store.names()) n_vision += is_foreign_tensor(cfg, name);
    if (n_vision > 0)
      cfg.warnings.push_back(fmt::format("{}: {} vision-tower / projector / MTP tensors are not used (text "
                                         "backbone only)", dir, n_vision));
  }
  for (const FamilyInfo& f : kFamilies)
    if (f.family == cfg.family) return f.make(std::move(cfg), std::move(w));
  fail("unsupported model family");
}

}  // namespace mmx
