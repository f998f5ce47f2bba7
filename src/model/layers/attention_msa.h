// M3 attention layer (spec §5.5, §5.6): q/k/v projections, per-head QK-norm, partial NeoX RoPE,
// K/V written into the block-major paged cache; dense layers attend over every visible page,
// sparse (MSA) layers first run the index branch (index q/k projections, norms, RoPE; the index
// key is cached per token), select top-k blocks per GQA group, then attend only over those pages.
// Projections, norms and RoPE (main and index branch) run over all rows of the forward; the K/V
// and index-key writes, the block selection and the attention run per sequence, against that
// sequence's cache. No kernels here — ops:: only.
#pragma once

#include "model/msa_stats.h"

#include "memory/kv_cache.h"
#include "model/forward_batch.h"
#include "model/weights.h"
#include "tensor/scratch.h"

namespace mmx::layers {

struct MsaAttentionParams {
  int n_heads = 0, n_kv_heads = 0, head_dim = 0, rotary_dim = 0;
  double rope_theta = 0;
  float norm_eps = 0;      // per-head QK-norm and index norms
  bool qk_norm = true;     // per head: one [head_dim] gain shared by all heads
  int page = 128;          // tokens per KV page (= MSA block)
  int index_dim = 0, topk = 0;  // sparse layers; index heads == n_kv_heads
  MsaStats* stats = nullptr;    // non-null: collect selection quality and timings (slow; analysis)
};

// The MSA / dense paged attention parameters a config implies.
MsaAttentionParams msa_attention_params(const ModelConfig& c);

// h: [n_rows, d_model] normed layer input (all sequences' rows); out: [n_rows, d_model].
// rows: which rows belong to which sequence (and cache), and their positions.
// sparse: run the MSA index branch + block-sparse attention (w.iq/w.ik set), else dense paged.
// Each cache's page is p.page and its capacity a multiple of it (Model::make_cache rounds it).
void attention_msa(const Tensor& h, const AttentionWeights& w, const MsaAttentionParams& p, bool sparse,
                   const SeqRows& rows, int il, Scratch& scratch, Tensor& out);

}  // namespace mmx::layers
