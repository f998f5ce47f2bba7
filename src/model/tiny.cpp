// Seeded tiny MiniMax-M2 / Text-01 / M1 checkpoints: config.json + model.safetensors in the HF layout.
#include "model/tiny.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "base/error.h"
#include "model/safetensors.h"
#include "model/tiny_tokenizer.h"

namespace mmx {

namespace {

using json = nlohmann::json;

struct Gen {
  std::mt19937_64 rng;
  bool synthetic = false;  // fast approximate normals (benchmark-sized checkpoints)
  uint64_t state = 0x9E3779B97F4A7C15ull;

  uint64_t next() {  // xorshift64*
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545F4914F6CDD1Dull;
  }
  std::vector<float> normal(int64_t n, float mean, float stddev) {
    std::vector<float> v(n);
    if (synthetic) {  // Irwin-Hall(4): sum of 4 uniforms, variance 4/12
      const float k = stddev * std::sqrt(3.0f) / 65536.0f;
      for (auto& x : v) {
        const uint64_t r = next();
        const float s = float(r & 0xffff) + float((r >> 16) & 0xffff) + float((r >> 32) & 0xffff) +
                        float(r >> 48) - 2.0f * 65535.0f;
        x = mean + s * k;
      }
      return v;
    }
    std::normal_distribution<float> d(mean, stddev);
    for (auto& x : v) x = d(rng);
    return v;
  }
};

// Synthetic FP8: random codes with |value| in [2^-3, 2^1) and one scale per block chosen so the
// weight's stddev is about 1/sqrt(cols). Only for benchmark checkpoints, where the values do not
// matter but the bytes and shapes do.
void add_fp8_synthetic(SafetensorsWriter& w, Gen& g, const std::string& name, int64_t rows,
                       int64_t cols, int b) {
  std::vector<uint8_t> q(rows * cols);
  for (size_t i = 0; i < q.size(); i += 8) {
    uint64_t r = g.next();
    for (size_t j = i; j < std::min(q.size(), i + 8); ++j, r >>= 8) {
      const uint8_t x = uint8_t(r);
      q[j] = uint8_t((x & 0x80) | ((4 + (x >> 3) % 4) << 3) | (x & 7));
    }
  }
  const int64_t sr = (rows + b - 1) / b, sc = (cols + b - 1) / b;
  const std::vector<float> scale(sr * sc, 1.0f / std::sqrt(float(cols)));
  w.add(name, DType::kF8E4M3, {rows, cols}, q.data(), q.size());
  w.add(name + "_scale_inv", DType::kF32, {sr, sc}, scale.data(), scale.size() * 4);
}

// Adds a tensor in storage dtype `dt` ("f32" | "f16" | "bf16"); fp8 goes through add_fp8.
void add_float(SafetensorsWriter& w, const std::string& name, std::vector<int64_t> shape,
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

// FP8 E4M3 with [ceil(rows/b), ceil(cols/b)] F32 multipliers stored as `<name>_scale_inv`.
void add_fp8(SafetensorsWriter& w, const std::string& name, int64_t rows, int64_t cols,
             const std::vector<float>& v, int b) {
  const int64_t sr = (rows + b - 1) / b, sc = (cols + b - 1) / b;
  std::vector<float> scale(sr * sc, 1.0f);
  for (int64_t br = 0; br < sr; ++br)
    for (int64_t bc = 0; bc < sc; ++bc) {
      float amax = 0;
      for (int64_t r = br * b; r < std::min(rows, (br + 1) * b); ++r)
        for (int64_t c = bc * b; c < std::min(cols, (bc + 1) * b); ++c)
          amax = std::max(amax, std::fabs(v[r * cols + c]));
      scale[br * sc + bc] = amax > 0 ? amax / 448.0f : 1.0f;
    }
  std::vector<uint8_t> q(v.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      q[r * cols + c] = f32_to_f8e4m3(v[r * cols + c] / scale[(r / b) * sc + c / b]);
  w.add(name, DType::kF8E4M3, {rows, cols}, q.data(), q.size());
  w.add(name + "_scale_inv", DType::kF32, {sr, sc}, scale.data(), scale.size() * 4);
}

void write_text(const std::filesystem::path& p, const std::string& s) {
  std::ofstream f(p);
  if (!f) fail("cannot write {}", p.string());
  f << s;
  if (!f) fail("error writing {}", p.string());
}

// The Text-01 / M1 config.json text (spec §3.1 keys; -hf spelling with o.hf_keys).
std::string tiny_text01_config_json(const TinyOptions& o, int64_t bos_id, int64_t eos_id) {
  const int64_t d = o.d_model, f = o.ffn_dim, V = o.vocab_size;
  std::vector<int> attn_type(o.n_layers);  // 0 = lightning, 1 = softmax
  for (int il = 0; il < o.n_layers; ++il) attn_type[il] = (il + 1) % o.full_attn_interval == 0;
  const bool m1 = o.arch == "minimax_m1";
  const double alpha = std::pow(2.0 * o.n_layers, 0.25);  // DeepNorm-style, as (2·80)^(1/4) in §3.1
  json cfg = {
      {"architectures", {m1 ? "MiniMaxM1ForCausalLM" : "MiniMaxText01ForCausalLM"}},
      {"model_type", m1 ? "minimax_m1" : "minimax_text_01"},
      {"hidden_size", d},
      {"num_hidden_layers", o.n_layers},
      {"num_attention_heads", o.n_heads},
      {"num_key_value_heads", o.n_kv_heads},
      {"head_dim", o.head_dim},
      {"rotary_dim", o.rotary_dim},
      {"rope_theta", 10000000.0},
      {"max_position_embeddings", o.max_position},
      {"intermediate_size", f},
      {"num_local_experts", o.n_experts},
      {"num_experts_per_tok", o.n_experts_active},
      {"shared_intermediate_size", 0},
      {"shared_moe_mode", "sigmoid"},
      {"hidden_act", "silu"},
      {"rms_norm_eps", 1e-5},
      {"vocab_size", V},
      {"tie_word_embeddings", false},
      {"sliding_window", nullptr},
      {"bos_token_id", bos_id},
      {"eos_token_id", eos_id},
      {"torch_dtype", o.dtype == "f32" ? "float32" : o.dtype == "f16" ? "float16" : "bfloat16"},
  };
  if (o.hf_keys) {
    std::vector<std::string> types;
    for (int t : attn_type) types.push_back(t ? "full_attention" : "linear_attention");
    cfg["layer_types"] = types;
    for (const char* k : {"full_attn", "linear_attn", "mlp"}) {
      cfg[fmt::format("{}_alpha_factor", k)] = alpha;
      cfg[fmt::format("{}_beta_factor", k)] = 1.0;
    }
  } else {
    cfg["attn_type_list"] = attn_type;
    for (const char* k : {"full_attention", "linear_attention", "mlp"}) {
      const std::string n = std::string(k) == "mlp" ? "layernorm_mlp" : fmt::format("layernorm_{}", k);
      cfg[n + "_alpha"] = alpha;
      cfg[n + "_beta"] = 1.0;
    }
    cfg["postnorm"] = true;
  }
  return cfg.dump(2) + "\n";
}

// MiniMax-Text-01 / M1 (spec §3.1 keys, §3.2 tensors): lightning layers (fused per-head
// interleaved qkv_proj, output_gate, norm, out_proj) and softmax layers (q/k/v/o_proj) mixed by
// attn_type_list; softmax-routed MoE without a shared expert; post-norm α/β residual.
void write_tiny_text01(const TinyOptions& o) {
  if (o.dtype == "fp8")
    fail("make-tiny: --dtype fp8 is not a {} format (Text-01 / M1 ship BF16); use f32, f16 or bf16",
         o.arch);
  if (o.dtype != "f32" && o.dtype != "f16" && o.dtype != "bf16")
    fail("make-tiny: unknown --dtype \"{}\" (supported for {}: f32, f16, bf16)", o.dtype, o.arch);
  if (o.n_heads <= 0 || (o.n_heads & (o.n_heads - 1)) != 0)
    fail("make-tiny: {} needs a power-of-two head count (lightning slopes, spec §3.5/§8), got {}",
         o.arch, o.n_heads);
  if (o.n_kv_heads <= 0 || o.n_heads % o.n_kv_heads != 0 || o.rotary_dim > o.head_dim ||
      o.rotary_dim % 2 != 0 || o.n_experts_active > o.n_experts || o.full_attn_interval < 1)
    fail("make-tiny: inconsistent shape options (heads % kv-heads, rotary <= head_dim and even, "
         "top-k <= experts, full-attention interval >= 1)");
  if (o.vocab_size < 300) fail("make-tiny: vocab_size must be >= 300 (256 bytes + specials + merges)");
  const TinyTokenizer tok = build_tiny_tokenizer(o.vocab_size);

  const int64_t d = o.d_model, qd = int64_t(o.n_heads) * o.head_dim,
                kvd = int64_t(o.n_kv_heads) * o.head_dim, f = o.ffn_dim, V = o.vocab_size;
  std::vector<int> attn_type(o.n_layers);  // 0 = lightning, 1 = softmax
  for (int il = 0; il < o.n_layers; ++il) attn_type[il] = (il + 1) % o.full_attn_interval == 0;

  Gen g{std::mt19937_64(o.seed)};
  g.synthetic = o.synthetic;
  g.state += o.seed * 0x9E3779B97F4A7C15ull;
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  // N(0, gain^2 / cols): unit-variance outputs for unit-RMS inputs.
  auto linear = [&](const std::string& name, int64_t rows, int64_t cols, float gain_ = 1.0f) {
    add_float(w, name, {rows, cols}, g.normal(rows * cols, 0.0f, gain_ / std::sqrt(float(cols))),
              o.dtype);
  };
  auto gain = [&](const std::string& name, int64_t n) {
    add_float(w, name, {n}, g.normal(n, 1.0f, 0.1f), o.dtype);
  };

  add_float(w, "model.embed_tokens.weight", {V, d}, g.normal(V * d, 0.0f, 1.0f), o.dtype);
  for (int il = 0; il < o.n_layers; ++il) {
    const std::string p = fmt::format("model.layers.{}.", il);
    gain(p + "input_layernorm.weight", d);
    gain(p + "post_attention_layernorm.weight", d);
    if (attn_type[il] == 0) {
      // qkv gain 0.75: silu(q)·silu(k) has a positive mean, so the undecayed heads of the late
      // layers grow ~linearly with context; at 0.75 the pre-norm output stays within ~1..30 RMS
      // over 96 tokens (the joint inner RMSNorm then brings it back to 1) and greedy decoding of
      // the tiny model does not collapse onto one token (checked with reference/minimax_text01.py).
      linear(p + "self_attn.qkv_proj.weight", 3 * qd, d, 0.75f);
      linear(p + "self_attn.output_gate.weight", qd, d);
      gain(p + "self_attn.norm.weight", qd);
      linear(p + "self_attn.out_proj.weight", d, qd);
    } else {
      linear(p + "self_attn.q_proj.weight", qd, d);
      linear(p + "self_attn.k_proj.weight", kvd, d);
      linear(p + "self_attn.v_proj.weight", kvd, d);
      linear(p + "self_attn.o_proj.weight", d, qd);
    }
    const std::string mp = p + "block_sparse_moe.";
    linear(mp + "gate.weight", o.n_experts, d);  // the router is BF16 in the real checkpoint too
    for (int e = 0; e < o.n_experts; ++e) {
      const std::string ep = fmt::format("{}experts.{}.", mp, e);
      linear(ep + "w1.weight", f, d);
      linear(ep + "w2.weight", d, f);
      linear(ep + "w3.weight", f, d);
    }
  }
  gain("model.norm.weight", d);
  linear("lm_head.weight", V, d);

  const std::filesystem::path dir(o.out_dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("make-tiny: cannot create {}: {}", o.out_dir, ec.message());
  w.write((dir / "model.safetensors").string());

  write_text(dir / "config.json", tiny_text01_config_json(o, tok.bos_id, tok.eos_id));
  const json gen = {{"bos_token_id", tok.bos_id}, {"eos_token_id", tok.eos_id},
                    {"temperature", 1.0}, {"top_p", 0.95}};
  write_text(dir / "generation_config.json", gen.dump(2) + "\n");
  write_text(dir / "tokenizer.json", tok.tokenizer_json + "\n");
  write_text(dir / "tokenizer_config.json", tok.tokenizer_config_json + "\n");
}

}  // namespace

std::string tiny_m2_config_json(const TinyOptions& o, int64_t bos_id, int64_t eos_id) {
  const int64_t d = o.d_model, f = o.ffn_dim, V = o.vocab_size;
  const bool fp8 = o.dtype == "fp8";
  json cfg = {
      {"architectures", {"MiniMaxM2ForCausalLM"}},
      {"model_type", "minimax_m2"},
      {"hidden_size", d},
      {"num_hidden_layers", o.n_layers},
      {"num_attention_heads", o.n_heads},
      {"num_key_value_heads", o.n_kv_heads},
      {"head_dim", o.head_dim},
      {"rotary_dim", o.rotary_dim},
      {"rope_theta", 10000.0},  // real M2: 5e6; smaller so RoPE is visible over a short test context
      {"max_position_embeddings", o.max_position},
      {"intermediate_size", f},
      {"num_local_experts", o.n_experts},
      {"num_experts_per_tok", o.n_experts_active},
      {"shared_intermediate_size", 0},
      {"scoring_func", "sigmoid"},
      {"use_routing_bias", true},
      {"use_qk_norm", true},
      {"qk_norm_type", "per_layer"},
      {"hidden_act", "silu"},
      {"rms_norm_eps", 1e-6},
      {"attn_type_list", std::vector<int>(o.n_layers, 1)},
      {"use_mtp", false},
      {"vocab_size", V},
      {"tie_word_embeddings", false},
      {"router_aux_loss_coef", 0.001},
      {"router_jitter_noise", 0.0},
      {"bos_token_id", bos_id},
      {"eos_token_id", eos_id},
      {"torch_dtype", o.dtype == "f32" ? "float32" : o.dtype == "f16" ? "float16" : "bfloat16"},
  };
  if (fp8)
    cfg["quantization_config"] = {{"quant_method", "fp8"},
                                  {"fmt", "float8_e4m3fn"},
                                  {"activation_scheme", "dynamic"},
                                  {"weight_block_size", {o.fp8_block, o.fp8_block}},
                                  {"modules_to_not_convert", {"gate", "e_score_correction_bias", "lm_head"}}};
  return cfg.dump(2) + "\n";
}

std::string tiny_config_json(const TinyOptions& o, int64_t bos_id, int64_t eos_id) {
  if (o.arch == "minimax_m3") return tiny_m3_config_json(o, bos_id, eos_id);
  if (o.arch == "minimax_m2") return tiny_m2_config_json(o, bos_id, eos_id);
  if (tiny_is_text01(o.arch)) return tiny_text01_config_json(o, bos_id, eos_id);
  fail("no config writer for --arch {} yet (training supports minimax_m2)", o.arch);
}

bool tiny_is_text01(const std::string& arch) {
  return arch == "minimax_text01" || arch == "minimax_m1";
}

TinyOptions tiny_defaults(const std::string& arch) {
  TinyOptions t;
  t.arch = arch;
  if (arch == "minimax_m2") return t;
  if (arch == "minimax_m3") {  // n_dense_layers, dense/shared widths, index and MSA fields: TinyOptions
    t.n_layers = 4, t.d_model = 64, t.n_heads = 8, t.n_kv_heads = 2, t.head_dim = 16;
    t.rotary_dim = 8, t.ffn_dim = 32, t.n_experts = 8, t.n_experts_active = 2, t.vocab_size = 512;
    return t;
  }
  if (!tiny_is_text01(arch))
    fail("make-tiny: unknown --arch \"{}\" (supported: minimax_m2, minimax_text01, minimax_m1, minimax_m3)", arch);
  t.n_layers = 8, t.d_model = 64, t.n_heads = 4, t.n_kv_heads = 2, t.head_dim = 16;
  t.rotary_dim = 8, t.ffn_dim = 32, t.n_experts = 8, t.n_experts_active = 2, t.vocab_size = 512;
  t.full_attn_interval = 4;
  return t;
}

void write_tiny_checkpoint(const TinyOptions& o) {
  if (tiny_is_text01(o.arch)) return write_tiny_text01(o);
  if (o.arch == "minimax_m3") return write_tiny_m3(o);
  if (o.arch != "minimax_m2")
    fail("make-tiny: unknown --arch \"{}\" (supported: minimax_m2, minimax_text01, minimax_m1, minimax_m3)", o.arch);
  if (o.dtype != "f32" && o.dtype != "f16" && o.dtype != "bf16" && o.dtype != "fp8")
    fail("make-tiny: unknown --dtype \"{}\" (supported: f32, f16, bf16, fp8)", o.dtype);
  if (o.fp8_block <= 0) fail("make-tiny: --fp8-block must be positive");
  if (o.n_heads % o.n_kv_heads != 0 || o.rotary_dim > o.head_dim || o.rotary_dim % 2 != 0 ||
      o.n_experts_active > o.n_experts)
    fail("make-tiny: inconsistent shape options (heads % kv-heads, rotary <= head_dim and even, "
         "top-k <= experts)");
  if (o.vocab_size < 300) fail("make-tiny: vocab_size must be >= 300 (256 bytes + specials + merges)");
  const TinyTokenizer tok = build_tiny_tokenizer(o.vocab_size);

  const int64_t d = o.d_model, qd = int64_t(o.n_heads) * o.head_dim,
                kvd = int64_t(o.n_kv_heads) * o.head_dim, f = o.ffn_dim, V = o.vocab_size;
  const bool fp8 = o.dtype == "fp8";
  const std::string dense = fp8 ? "bf16" : o.dtype;  // dtype of unquantized tensors
  Gen g{std::mt19937_64(o.seed)};
  g.synthetic = o.synthetic;
  g.state += o.seed * 0x9E3779B97F4A7C15ull;
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  auto linear = [&](const std::string& name, int64_t rows, int64_t cols) {
    if (fp8 && o.synthetic) return add_fp8_synthetic(w, g, name, rows, cols, o.fp8_block);
    const auto v = g.normal(rows * cols, 0.0f, 1.0f / std::sqrt(float(cols)));
    if (fp8) add_fp8(w, name, rows, cols, v, o.fp8_block);
    else add_float(w, name, {rows, cols}, v, dense);
  };
  auto gain = [&](const std::string& name, int64_t n) {
    add_float(w, name, {n}, g.normal(n, 1.0f, 0.1f), dense);
  };

  add_float(w, "model.embed_tokens.weight", {V, d}, g.normal(V * d, 0.0f, 1.0f), dense);
  for (int il = 0; il < o.n_layers; ++il) {
    const std::string p = fmt::format("model.layers.{}.", il);
    gain(p + "input_layernorm.weight", d);
    gain(p + "post_attention_layernorm.weight", d);
    linear(p + "self_attn.q_proj.weight", qd, d);
    linear(p + "self_attn.k_proj.weight", kvd, d);
    linear(p + "self_attn.v_proj.weight", kvd, d);
    linear(p + "self_attn.o_proj.weight", d, qd);
    gain(p + "self_attn.q_norm.weight", qd);
    gain(p + "self_attn.k_norm.weight", kvd);
    const std::string mp = p + "block_sparse_moe.";
    // The router stays F32 and the bias F32 in every variant, as in the real checkpoint.
    const auto gate = g.normal(int64_t(o.n_experts) * d, 0.0f, 1.0f / std::sqrt(float(d)));
    w.add(mp + "gate.weight", DType::kF32, {o.n_experts, d}, gate.data(), gate.size() * 4);
    const auto bias = g.normal(o.n_experts, 0.0f, 0.1f);
    w.add(mp + "e_score_correction_bias", DType::kF32, {o.n_experts}, bias.data(), bias.size() * 4);
    for (int e = 0; e < o.n_experts; ++e) {
      const std::string ep = fmt::format("{}experts.{}.", mp, e);
      linear(ep + "w1.weight", f, d);
      linear(ep + "w2.weight", d, f);
      linear(ep + "w3.weight", f, d);
    }
  }
  gain("model.norm.weight", d);
  add_float(w, "lm_head.weight", {V, d}, g.normal(V * d, 0.0f, 1.0f / std::sqrt(float(d))), dense);

  const std::filesystem::path dir(o.out_dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("make-tiny: cannot create {}: {}", o.out_dir, ec.message());
  w.write((dir / "model.safetensors").string());

  write_text(dir / "config.json", tiny_m2_config_json(o, tok.bos_id, tok.eos_id));
  const json gen = {{"bos_token_id", tok.bos_id}, {"eos_token_id", tok.eos_id},
                    {"temperature", 1.0}, {"top_p", 0.95}, {"top_k", 40}};
  write_text(dir / "generation_config.json", gen.dump(2) + "\n");
  write_text(dir / "tokenizer.json", tok.tokenizer_json + "\n");
  write_text(dir / "tokenizer_config.json", tok.tokenizer_config_json + "\n");
}

}  // namespace mmx
