// Model: a loaded checkpoint that turns a ForwardBatch into logits.
//
// One implementation per model family (families/*.cpp), chosen by the registry from the HF
// architectures[0] string. The model owns its weights and scratch; per-sequence state lives in
// the KvCache the caller passes in.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "memory/kv_cache.h"
#include "model/config.h"
#include "model/forward_batch.h"
#include "model/msa_stats.h"
#include "model/phase_times.h"
#include "model/tensor_values.h"

namespace mmx {

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;

  // Runs the new tokens of `batch` (positions kv.n_past() ...), appends their K/V to `kv`
  // and advances kv.n_past(). logits: [batch.n_logit_rows(), vocab_size] F32.
  // Throws mmx::Error for invalid token ids or a full cache (nothing is modified then).
  virtual void forward(const ForwardBatch& batch, KvCache& kv, Tensor& logits) = 0;

  // Fused multi-sequence forward (continuous batching). SeqChunk (model/forward_batch.h): one
  // sequence's share, rows [begin, begin + n) of the concatenated tokens, at positions
  // kv->n_past() .. + n - 1, appended to *kv.
  // Runs every chunk in one pass over the weights (row-wise ops over all rows; attention per
  // sequence over its own cache). tokens: [sum n] I32; logits: [logit_rows(chunks), vocab] F32:
  // chunk i's rows follow those of chunks 0..i-1 — its last n_logits rows, in order (one row of
  // NaN, not computed, when n_logits is 0). hidden (optional): the same rows of the final-normed
  // hidden state, [logit_rows(chunks), d_model] F32 — what the lm_head projects, and what an MTP
  // module drafts from.
  // Advances each kv's n_past. Throws mmx::Error like forward() (nothing modified then) — every
  // chunk is validated before any cache is touched. The chunks must tile
  // [0, tokens.dim(0)) in order, each with n >= 1, 0 <= n_logits <= n and its own cache.
  // A chunk that crosses a lightning-state checkpoint is run in rounds (families/rowwise_model.h).
  virtual void forward_multi(const Tensor& tokens, std::span<const SeqChunk> chunks, Tensor& logits,
                             Tensor* hidden = nullptr) = 0;

  // Replaces the values of the named checkpoint tensors (the rest keep theirs), as if the
  // checkpoint had held them: each is encoded in the dtype the model stores it in (F32 copied,
  // F16 / BF16 rounded to nearest even, GGUF block types requantized), Gemma (1 + w) gains folded
  // as at load. Everything is checked before anything is written: an unknown or repeated name, a
  // wrong element count, or a tensor stored as F8_E4M3 (block scales) throws mmx::Error and
  // changes nothing. Not concurrent with forward(): the engine calls it between steps; K/V or
  // states computed before it are stale (the caller drops them). model/weight_update.cpp.
  virtual void update_weights(std::span<const TensorValues> updates) = 0;

  // M3: collect MSA selection quality and timings into `stats` (null = stop); it must outlive
  // the forwards. Other families have no MSA layers and ignore it.
  virtual void set_msa_stats(MsaStats* stats) { (void)stats; }

  // Add each forward's time per phase (attention, router, experts, lm_head) into `t` (null =
  // stop); it must outlive the forwards (mmx bench model).
  virtual void set_phase_times(PhaseTimes* t) { (void)t; }

  // Per-sequence memory for up to `capacity` tokens: K/V for softmax layers, a state for each
  // lightning layer, with state checkpoints every `checkpoint_every` tokens (newest
  // `max_checkpoints` kept; see memory/kv_cache.h for what they cost). kv_dtype: K/V page
  // storage, kF32 or kBF16 (half the bytes, K/V rounded to bf16); ik_dtype: MSA index keys
  // (memory/page_store.h; none = kv_dtype).
  KvCache make_cache(int64_t capacity, int64_t checkpoint_every = 1024, int max_checkpoints = 4,
                     DType kv_dtype = DType::kF32, std::optional<DType> ik_dtype = std::nullopt) const {
    // Pages of the block-major KV view: M3 reads whole MSA blocks, so a page is one block.
    return KvCache(cache_specs(), capacity, checkpoint_every, max_checkpoints, config().kv_page(),
                   kv_dtype, ik_dtype);
  }
  // What each layer keeps per sequence: K/V (+ index keys) for softmax and sparse layers, a state
  // for lightning layers. The serving engine builds its shared PageStore from these.
  std::vector<LayerCacheSpec> cache_specs() const {
    const ModelConfig& c = config();
    std::vector<LayerCacheSpec> specs;
    for (LayerKind k : c.layer_kinds) {
      if (k == LayerKind::kLightning)
        specs.push_back({LayerCacheSpec::kLinearState, c.n_heads, c.head_dim});
      else
        specs.push_back({LayerCacheSpec::kKv, c.n_kv_heads, c.head_dim,
                         k == LayerKind::kSparse ? c.msa.index_dim : 0});
    }
    return specs;
  }
};

// Run-time choices that do not change the math (only rounding), applied over config.json.
struct LoadOptions {
  // > 0: chunk length of the blockwise lightning prefill. 0: min(config `block`, 64) — on this
  // CPU path 64 measured ~1.5x faster than the config's 256, whose scratch exceeds L2
  // (bench/lightning, block sweep); the block changes rounding only (spec §3.5 step 4).
  int lightning_block = 0;
  // Set: the lm_head is re-encoded at load in this type (F16, BF16 or a GGUF block type such as
  // Q8_0), as llama.cpp's converter stores the output matrix of a Q8_0 file. The official FP8
  // checkpoints ship a BF16 lm_head: [200064, 3072] is 1.2 GB read per decoded token, as much as
  // the active experts of a few layers. Changes the logits within that type's error.
  std::optional<DType> lm_head_dtype;
  // false (default): the weight files are read into anonymous 2 MiB huge pages at load
  // (base/mapped_file.h: measured faster for MoE decode); true: they stay mapped (no copy, pages
  // fault in on first use), as before.
  bool mmap_weights = false;
};

// Loads DIR (config.json + safetensors). progress(done, total) may be null.
std::unique_ptr<Model> load_model(const std::string& dir, void (*progress)(int, int) = nullptr,
                                  const LoadOptions& opts = {});

// Throws mmx::Error unless every id is in [0, vocab_size).
void validate_token_ids(const Tensor& tokens, int64_t vocab_size);

// The checks every Model::forward makes before touching anything: valid ids, the batch starts at
// the cache's n_past(), fits its capacity, and `logits` is [n_logit_rows, vocab]. Throws.
void check_forward_args(const ModelConfig& c, const ForwardBatch& batch, const KvCache& kv,
                        const Tensor& logits);

// The same checks for Model::forward_multi: valid ids, chunks tiling the tokens in order with
// n >= 1 and 0 <= n_logits <= n, non-null and pairwise distinct caches, each fitting its capacity,
// and `logits` is [logit_rows(chunks), vocab] (`hidden`, when given, [logit_rows(chunks), d_model]).
// Throws.
void check_forward_multi_args(const ModelConfig& c, const Tensor& tokens, std::span<const SeqChunk> chunks,
                              const Tensor& logits, const Tensor* hidden = nullptr);

// positions[c.begin + i] = c.kv->n_past() + i for every chunk c. positions: [tokens] I32.
void fill_chunk_positions(std::span<const SeqChunk> chunks, Tensor& positions);

}  // namespace mmx
