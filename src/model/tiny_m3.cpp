// Seeded tiny MiniMax-M3 checkpoints (spec §5): the vision-language wrapper config.json
// (model_type minimax_m3_vl) with the LLM in text_config, text tensors under `language_model.`
// (§5.3), two dummy vision tensors the text loader must ignore, and MXFP8 weights (§5.2).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "model/safetensors.h"
#include "model/tiny.h"
#include "model/tiny_tokenizer.h"

namespace mmx {

namespace {

using json = nlohmann::json;

std::vector<float> normals(std::mt19937_64& rng, int64_t n, float mean, float stddev) {
  std::normal_distribution<float> d(mean, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// One tensor in an unquantized storage dtype: "f32" | "f16" | "bf16".
void put_plain(SafetensorsWriter& w, const std::string& name, std::vector<int64_t> shape,
               const std::vector<float>& v, const std::string& dt) {
  if (dt == "f32") {
    w.add(name, DType::kF32, std::move(shape), v.data(), v.size() * 4);
    return;
  }
  const bool f16 = dt == "f16";
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = f16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
  w.add(name, f16 ? DType::kF16 : DType::kBF16, std::move(shape), h.data(), h.size() * 2);
}

// MXFP8 (§5.2): E4M3 weight [rows, cols] + `<name>_scale_inv` U8 E8M0 [rows, ceil(cols/32)],
// w = fp8 · 2^(e − 127). Each 32-group's exponent is the smallest that keeps its max |w| within
// the E4M3 range (448).
void put_mxfp8(SafetensorsWriter& w, const std::string& name, int64_t rows, int64_t cols,
               const std::vector<float>& v) {
  constexpr int64_t kGroup = 32;
  const int64_t ng = (cols + kGroup - 1) / kGroup;
  std::vector<uint8_t> q(rows * cols), e(rows * ng);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t gi = 0; gi < ng; ++gi) {
      const int64_t c0 = gi * kGroup, c1 = std::min(cols, c0 + kGroup);
      float amax = 0;
      for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(v[r * cols + c]));
      int ex = 127;
      if (amax > 0) ex = 127 + int(std::ceil(std::log2(double(amax) / 448.0)));
      ex = std::clamp(ex, 1, 254);
      e[r * ng + gi] = uint8_t(ex);
      const float inv = std::ldexp(1.0f, 127 - ex);  // exact power of two
      for (int64_t c = c0; c < c1; ++c) q[r * cols + c] = f32_to_f8e4m3(v[r * cols + c] * inv);
    }
  w.add(name, DType::kF8E4M3, {rows, cols}, q.data(), q.size());
  w.add(name + "_scale_inv", DType::kU8, {rows, ng}, e.data(), e.size());
}

void write_file(const std::filesystem::path& p, const std::string& s) {
  std::ofstream f(p);
  if (!f) fail("cannot write {}", p.string());
  f << s;
  if (!f) fail("error writing {}", p.string());
}

}  // namespace

std::string tiny_m3_config_json(const TinyOptions& o, int64_t bos_id, int64_t eos_id) {
  const int64_t d = o.d_model, V = o.vocab_size;
  const int64_t G = o.n_kv_heads, di = o.index_dim;  // one index head per KV group (§5.6)
  const bool mx = o.dtype == "mxfp8";
  std::vector<int> sparse(o.n_layers), moe(o.n_layers), disable_iv(o.n_layers);
  for (int il = 0; il < o.n_layers; ++il)
    sparse[il] = moe[il] = disable_iv[il] = il >= o.n_dense_layers ? 1 : 0;
  const char* torch_dtype = o.dtype == "f32" ? "float32" : o.dtype == "f16" ? "float16" : "bfloat16";
  const json sac = {
      {"use_sparse_attention", true},
      {"sparse_index_dim", di},
      {"sparse_num_index_heads", G},
      {"sparse_topk_blocks", o.msa_topk},
      {"sparse_block_size", o.msa_block},
      {"sparse_score_type", "max"},
      {"sparse_init_block", 0},
      {"sparse_local_block", 1},
      {"sparse_attention_freq", sparse},
      {"sparse_disable_index_value", disable_iv},
  };
  const json text = {
      {"hidden_size", d},
      {"num_hidden_layers", o.n_layers},
      {"num_attention_heads", o.n_heads},
      {"num_key_value_heads", o.n_kv_heads},
      {"head_dim", o.head_dim},
      {"rotary_dim", o.rotary_dim},
      {"partial_rotary_factor", double(o.rotary_dim) / o.head_dim},
      {"rope_theta", 5000000.0},
      {"max_position_embeddings", o.max_position},
      {"vocab_size", V},
      {"rms_norm_eps", 1e-6},
      {"use_gemma_norm", true},
      {"use_qk_norm", true},
      {"qk_norm_type", "per_head"},
      {"attention_output_gate", false},
      {"hidden_act", "swigluoai"},
      {"swiglu_alpha", 1.702},
      {"swiglu_limit", 7.0},
      {"dense_intermediate_size", o.dense_ffn_dim},
      {"intermediate_size", o.ffn_dim},
      {"shared_intermediate_size", o.shared_ffn_dim},
      {"n_shared_experts", 1},
      {"num_local_experts", o.n_experts},
      {"num_experts_per_tok", o.n_experts_active},
      {"scoring_func", "sigmoid"},
      {"use_routing_bias", true},
      {"routed_scaling_factor", 2.0},
      {"moe_layer_freq", moe},
      {"sparse_attention_config", sac},
      {"num_mtp_modules", 0},
      {"num_nextn_predict_layers", 0},
      {"tie_word_embeddings", false},
      {"bos_token_id", bos_id},
      {"eos_token_id", eos_id},
      {"torch_dtype", torch_dtype},
  };
  json cfg = {
      {"architectures", {"MiniMaxM3SparseForConditionalGeneration"}},
      {"model_type", "minimax_m3_vl"},
      {"text_config", text},
      {"vision_config",
       {{"model_type", "minimax_m3_vision"}, {"hidden_size", 16}, {"num_hidden_layers", 1},
        {"num_attention_heads", 2}, {"patch_size", 14}, {"temporal_patch_size", 2},
        {"spatial_merge_size", 2}}},
      {"image_token_index", 200025},
      {"video_token_index", 200026},
      {"projector_hidden_size", d},
      {"tie_word_embeddings", false},
      {"torch_dtype", torch_dtype},
  };
  if (mx)
    cfg["quantization_config"] = {{"quant_method", "mxfp8"},
                                  {"activation_scheme", "dynamic"},
                                  {"weight_block_size", {1, 32}},
                                  {"ignored_layers", {"lm_head", "model.embed_tokens", "vision_tower"}}};
  return cfg.dump(2) + "\n";
}

void write_tiny_m3(const TinyOptions& o) {
  if (o.dtype == "fp8")
    fail("make-tiny: minimax_m3 quantizes as MXFP8 (1x32 E8M0 scales, spec §5.2); use --dtype mxfp8");
  if (o.dtype != "f32" && o.dtype != "f16" && o.dtype != "bf16" && o.dtype != "mxfp8")
    fail("make-tiny: unknown --dtype \"{}\" (supported for minimax_m3: f32, f16, bf16, mxfp8)",
         o.dtype);
  if (o.n_kv_heads <= 0 || o.n_heads % o.n_kv_heads != 0 || o.rotary_dim % 2 != 0 ||
      o.rotary_dim > o.head_dim || o.rotary_dim > o.index_dim || o.n_experts_active > o.n_experts ||
      o.n_dense_layers < 0 || o.n_dense_layers > o.n_layers || o.msa_block < 1 || o.msa_topk < 1 ||
      o.dense_ffn_dim < 1 || o.shared_ffn_dim < 1 || o.index_dim < 2)
    fail("make-tiny: inconsistent minimax_m3 shape options (heads % kv-heads, rotary even and <= "
         "head_dim and index_dim, top-k <= experts, 0 <= dense layers <= layers, MSA block/top-k >= 1)");
  if (o.vocab_size < 300) fail("make-tiny: vocab_size must be >= 300 (256 bytes + specials + merges)");
  const TinyTokenizer tok = build_tiny_tokenizer(o.vocab_size);

  const int64_t d = o.d_model, qd = int64_t(o.n_heads) * o.head_dim,
                kvd = int64_t(o.n_kv_heads) * o.head_dim, V = o.vocab_size, E = o.n_experts;
  const int64_t G = o.n_kv_heads, di = o.index_dim;  // one index head per KV group (§5.6)
  const bool mx = o.dtype == "mxfp8";
  const std::string plain = mx ? "bf16" : o.dtype;  // dtype of everything not quantized
  std::vector<int> sparse(o.n_layers), moe(o.n_layers);
  for (int il = 0; il < o.n_layers; ++il) sparse[il] = moe[il] = il >= o.n_dense_layers ? 1 : 0;

  std::mt19937_64 rng(o.seed ^ 0x4D334D334D334D33ull);
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  // N(0, 1/cols): unit-variance outputs for unit-RMS inputs. Quantized under mxfp8.
  auto linear = [&](const std::string& name, int64_t rows, int64_t cols) {
    const auto v = normals(rng, rows * cols, 0.0f, 1.0f / std::sqrt(float(cols)));
    if (mx) put_mxfp8(w, name, rows, cols, v);
    else put_plain(w, name, {rows, cols}, v, plain);
  };
  // Gemma norms store the offset from 1 (§2): small values around 0.
  auto offset = [&](const std::string& name, int64_t n) {
    put_plain(w, name, {n}, normals(rng, n, 0.0f, 0.1f), plain);
  };
  auto f32 = [&](const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v) {
    w.add(name, DType::kF32, std::move(shape), v.data(), v.size() * 4);
  };

  const std::string P = "language_model.";
  put_plain(w, P + "model.embed_tokens.weight", {V, d}, normals(rng, V * d, 0.0f, 1.0f), plain);
  for (int il = 0; il < o.n_layers; ++il) {
    const std::string p = fmt::format("{}model.layers.{}.", P, il), a = p + "self_attn.";
    offset(p + "input_layernorm.weight", d);
    offset(p + "post_attention_layernorm.weight", d);
    linear(a + "q_proj.weight", qd, d);
    linear(a + "k_proj.weight", kvd, d);
    linear(a + "v_proj.weight", kvd, d);
    linear(a + "o_proj.weight", d, qd);
    offset(a + "q_norm.weight", o.head_dim);  // per-head: one [head_dim] gain for all heads
    offset(a + "k_norm.weight", o.head_dim);
    if (sparse[il]) {
      // Index scores iq·ik of Gemma-normed 16-d vectors have std ~4 across keys, so blocks
      // rank clearly apart (selection margins far above fp32 noise on the test seeds).
      linear(a + "index_q_proj.weight", G * di, d);
      linear(a + "index_k_proj.weight", di, d);
      offset(a + "index_q_norm.weight", di);
      offset(a + "index_k_norm.weight", di);
    }
    if (moe[il]) {
      const std::string m = p + "block_sparse_moe.";
      // Router and bias stay F32 in every variant, as in the real checkpoint (§5.2).
      f32(m + "gate.weight", {E, d}, normals(rng, E * d, 0.0f, 1.0f / std::sqrt(float(d))));
      f32(m + "e_score_correction_bias", {E}, normals(rng, E, 0.0f, 0.1f));
      for (int e = 0; e < o.n_experts; ++e) {
        const std::string ep = fmt::format("{}experts.{}.", m, e);
        linear(ep + "w1.weight", o.ffn_dim, d);
        linear(ep + "w2.weight", d, o.ffn_dim);
        linear(ep + "w3.weight", o.ffn_dim, d);
      }
      linear(m + "shared_experts.gate_proj.weight", o.shared_ffn_dim, d);
      linear(m + "shared_experts.up_proj.weight", o.shared_ffn_dim, d);
      linear(m + "shared_experts.down_proj.weight", d, o.shared_ffn_dim);
    } else {
      linear(p + "mlp.gate_proj.weight", o.dense_ffn_dim, d);
      linear(p + "mlp.up_proj.weight", o.dense_ffn_dim, d);
      linear(p + "mlp.down_proj.weight", d, o.dense_ffn_dim);
    }
  }
  offset(P + "model.norm.weight", d);
  put_plain(w, P + "lm_head.weight", {V, d}, normals(rng, V * d, 0.0f, 1.0f / std::sqrt(float(d))),
            plain);
  // Vision tensors (out of scope for text, §5.9): a loader of the text model must skip them.
  put_plain(w, "vision_tower.vision_model.embeddings.patch_embedding.weight", {16, 12},
            normals(rng, 16 * 12, 0.0f, 1.0f), plain);
  put_plain(w, "multi_modal_projector.linear_1.weight", {d, 16}, normals(rng, d * 16, 0.0f, 0.25f),
            plain);

  const std::filesystem::path dir(o.out_dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("make-tiny: cannot create {}: {}", o.out_dir, ec.message());
  w.write((dir / "model.safetensors").string());

  write_file(dir / "config.json", tiny_m3_config_json(o, tok.bos_id, tok.eos_id));
  const json gen = {{"bos_token_id", tok.bos_id}, {"eos_token_id", tok.eos_id},
                    {"temperature", 1.0}, {"top_p", 0.95}};
  write_file(dir / "generation_config.json", gen.dump(2) + "\n");
  write_file(dir / "tokenizer.json", tok.tokenizer_json + "\n");
  write_file(dir / "tokenizer_config.json", tok.tokenizer_config_json + "\n");
}

}  // namespace mmx
