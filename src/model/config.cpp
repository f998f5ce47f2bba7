// config.json -> ModelConfig: the shared steps and the dispatch on architectures[0].
// Family-specific keys live in each family file (families/minimax_<family>.cpp), found through
// the family table (families/registry.cpp).
#include "model/config.h"

#include "formats/checkpoint.h"

#include <fmt/format.h>

#include "model/config_parse.h"
#include "model/families/registry.h"
#include "model/schema.h"

namespace mmx {

namespace config_parse {

void parse_fp8(const json& q, const std::string& where, ModelConfig& c) {
  if (!q.is_object()) fail("{}: \"quantization_config\" must be an object", where);
  const std::string method = q.value("quant_method", std::string("none"));
  if (method == "none") return;
  if (method != "fp8")
    fail("{}: quantization_config.quant_method \"{}\" is not supported (supported: fp8 with "
         "128x128-style weight blocks, as shipped with MiniMax-M2)", where, method);
  const std::string fmt_name = q.value("fmt", std::string("float8_e4m3fn"));
  if (fmt_name != "float8_e4m3fn" && fmt_name != "e4m3")
    fail("{}: quantization_config.fmt \"{}\" is not supported (only float8_e4m3fn)", where, fmt_name);
  if (q.contains("activation_scheme") && q["activation_scheme"] != "dynamic")
    fail("{}: quantization_config.activation_scheme {} is not supported (only \"dynamic\")", where,
         q["activation_scheme"].dump());
  c.fp8.enabled = true;
  if (q.contains("weight_block_size")) {
    const json& b = q["weight_block_size"];
    if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
        b[0].get<int64_t>() <= 0 || b[1].get<int64_t>() <= 0 || b[0].get<int64_t>() > 65536 ||
        b[1].get<int64_t>() > 65536)
      fail("{}: quantization_config.weight_block_size must be two positive integers, got {}", where,
           b.dump());
    c.fp8.block_out = int(b[0].get<int64_t>());
    c.fp8.block_in = int(b[1].get<int64_t>());
  } else {
    fail("{}: quantization_config has no weight_block_size; per-tensor fp8 scales are not "
         "supported", where);
  }
  if (q.contains("modules_to_not_convert") && q["modules_to_not_convert"].is_array())
    for (const auto& m : q["modules_to_not_convert"])
      if (m.is_string()) c.fp8_skip_modules.push_back(m.get<std::string>());
}

void parse_token_ids(const json& j, ModelConfig& c, const std::string& where) {
  // An id is an integer in [0, vocab_size); null (or absent) means none. Anything else would
  // silently never stop generation (eos) or start it wrong (bos), so it is an error.
  const auto id = [&](const json& v, const char* key) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c.vocab_size)
      fail("{}: {} must be a token id in [0, {}) (vocab_size), got {}", where, key, c.vocab_size, v.dump());
    return v.get<int64_t>();
  };
  if (j.contains("bos_token_id") && !j["bos_token_id"].is_null()) c.bos_token_id = id(j["bos_token_id"], "bos_token_id");
  if (j.contains("eos_token_id") && !j["eos_token_id"].is_null()) {
    const json& e = j["eos_token_id"];
    if (e.is_array())
      for (const auto& v : e) c.eos_token_ids.push_back(id(v, "eos_token_id[]"));
    else
      c.eos_token_ids.push_back(id(e, "eos_token_id"));
  }
}

void parse_common(const json& j, const Reader& r, ModelConfig& c, std::set<std::string>& used) {
  const std::string& where = r.where();
  used.insert({"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
               "num_key_value_heads", "head_dim", "rotary_dim", "partial_rotary_factor",
               "rope_theta", "rope_scaling", "max_position_embeddings", "rms_norm_eps",
               "hidden_act", "sliding_window", "attn_window_size", "tie_word_embeddings",
               "bos_token_id", "eos_token_id"});
  constexpr int64_t kBig = int64_t(1) << 40;
  c.vocab_size = r.integer("vocab_size", 1, int64_t(1) << 31);
  c.d_model = r.integer("hidden_size", 1, 1 << 20);
  c.n_layers = int(r.integer("num_hidden_layers", 1, 4096));
  c.n_heads = int(r.integer("num_attention_heads", 1, 4096));
  c.n_kv_heads = int(r.integer_or("num_key_value_heads", c.n_heads, 1, 4096));
  if (c.n_heads % c.n_kv_heads != 0)
    fail("{}: num_attention_heads ({}) must be a multiple of num_key_value_heads ({})", where,
         c.n_heads, c.n_kv_heads);
  c.head_dim = int(r.integer_or("head_dim", c.d_model / c.n_heads, 2, 4096));
  if (r.has("rotary_dim")) {
    c.rotary_dim = int(r.integer("rotary_dim", 0, c.head_dim));
  } else {
    const double f = r.number_or("partial_rotary_factor", 1.0);
    c.rotary_dim = int(std::lround(f * c.head_dim));
  }
  if (c.rotary_dim % 2 != 0 || c.rotary_dim > c.head_dim)
    fail("{}: rotary_dim {} must be even and <= head_dim {}", where, c.rotary_dim, c.head_dim);
  c.rope_theta = r.number_or("rope_theta", 10000.0);
  if (!(c.rope_theta > 1.0)) fail("{}: rope_theta must be > 1, got {}", where, c.rope_theta);
  if (r.has("rope_scaling"))
    fail("{}: rope_scaling is set ({}); RoPE scaling is not supported (the released MiniMax "
         "configs have none)", where, j["rope_scaling"].dump());
  c.max_position = r.integer_or("max_position_embeddings", 196608, 1, kBig);
  c.norm_eps = float(r.number_or("rms_norm_eps", 1e-6));
  if (!(c.norm_eps > 0)) fail("{}: rms_norm_eps must be > 0", where);
  const char* want = c.family == Family::kMiniMaxM3 ? "swigluoai" : "silu";
  const std::string act = r.string_or("hidden_act", want);
  if (act != want) fail("{}: hidden_act \"{}\" is not supported (this family uses {})", where, act, want);
  for (const char* k : {"sliding_window", "attn_window_size"})
    if (r.has(k)) fail("{}: \"{}\" is set; sliding-window attention is not supported", where, k);
  c.tie_word_embeddings = r.boolean_or("tie_word_embeddings", false);
  parse_token_ids(j, c, where);
}

void parse_moe_shape(const Reader& r, ModelConfig& c, std::set<std::string>& used) {
  used.insert({"intermediate_size", "num_local_experts", "num_experts_per_tok"});
  c.ffn_dim = r.integer("intermediate_size", 1, 1 << 20);
  c.n_experts = int(r.integer("num_local_experts", 1, 65536));
  c.n_experts_active = int(r.integer("num_experts_per_tok", 1, c.n_experts));
}

void warn_unknown_keys(const json& j, const std::set<std::string>& used,
                       const std::set<std::string>& ignored, ModelConfig& c, const std::string& where) {
  for (const auto& [key, _] : j.items())
    if (!used.count(key) && !ignored.count(key))
      c.warnings.push_back(fmt::format("{}: unknown key \"{}\" ignored", where, key));
}

}  // namespace config_parse

ModelConfig parse_config(const std::string& text, const std::string& where) {
  using namespace config_parse;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: not valid JSON: {}", where, e.what());
  }
  if (!j.is_object()) fail("{}: expected a JSON object", where);

  ModelConfig c;
  if (!j.contains("architectures") || !j["architectures"].is_array() || j["architectures"].empty() ||
      !j["architectures"][0].is_string())
    fail("{}: \"architectures\" must be a non-empty list of strings", where);
  c.architecture = j["architectures"][0].get<std::string>();
  const FamilyInfo* f = find_family(c.architecture);
  if (f == nullptr)
    fail("{}: architecture \"{}\" is not supported (supported: {})", where, c.architecture,
         supported_architectures());
  c.family = f->family;
  f->parse_config(j, where, c);
  return c;
}

ModelConfig load_config(const Checkpoint& ck) {
  // A GGUF file's config is read from its metadata and two tensors' shapes, named by the schema.
  const gguf::ModelTensorNames names{gguf_tensor_name(Family::kMiniMaxM2, TensorRole::kEmbed),
                                     gguf_tensor_name(Family::kMiniMaxM2, TensorRole::kLmHead)};
  return parse_config(ck.config_text(names), ck.config_where());
}

ModelConfig load_config(const std::string& dir) { return load_config(open_checkpoint(dir)); }

std::string config_summary(const ModelConfig& c) {
  std::string s;
  s += fmt::format("architecture      {}\n", c.architecture);
  const int n_lin = c.count_layers(LayerKind::kLightning);
  if (n_lin == 0)
    s += fmt::format("layers            {} ({})\n", c.n_layers,
                     c.family == Family::kMiniMaxM3 ? "dense + MiniMax Sparse Attention" : "softmax GQA attention");
  else
    s += fmt::format("layers            {} = {} lightning + {} softmax GQA attention\n", c.n_layers, n_lin,
                     c.n_layers - n_lin);
  s += fmt::format("d_model           {}\n", c.d_model);
  s += fmt::format("heads             {} q / {} kv, head_dim {}, rotary_dim {} (neox), theta {:g}\n",
                   c.n_heads, c.n_kv_heads, c.head_dim, c.rotary_dim, c.rope_theta);
  s += fmt::format("qk-norm           {}\n", !c.use_qk_norm ? "none"
                                              : c.qk_norm_per_head ? "per head (one gain shared by heads)"
                                                                   : "whole projection (per_layer)");
  if (c.family == Family::kMiniMaxM3) {
    const int n_sparse = c.count_layers(LayerKind::kSparse);
    int n_dense_mlp = 0;
    for (int il = 0; il < c.n_layers; ++il) n_dense_mlp += !c.is_moe_layer(il);
    s += fmt::format("msa               {} sparse layers: {} index heads x {}, top-{} blocks of {} tokens "
                     "(local block forced); {} dense-attention layers\n",
                     n_sparse, c.msa.index_heads, c.msa.index_dim, c.msa.topk, c.msa.block,
                     c.n_layers - n_sparse);
    s += fmt::format("ffn               {} dense SwiGLU-OAI MLP layers (width {}), then MoE; shared expert "
                     "{}; alpha {:g}, limit {:g}; gemma (1+w) norms {}\n",
                     n_dense_mlp, c.dense_ffn_dim, c.shared_ffn_dim, c.swiglu_alpha, c.swiglu_limit,
                     c.gemma_norm ? "yes" : "no");
  }
  if (n_lin > 0)
    s += fmt::format("lightning         {} heads x {}, state {} KiB/layer, block {}, inner norm eps {:g}\n",
                     c.n_heads, c.head_dim, int64_t(c.n_heads) * c.head_dim * c.head_dim * 4 / 1024,
                     c.lightning_block, c.lightning_norm_eps);
  if (c.family == Family::kMiniMaxText01)
    s += fmt::format("residual          {}, alpha/beta attn {:g}/{:g}, lightning {:g}/{:g}, mlp {:g}/{:g}\n",
                     c.postnorm ? "post-norm (carries the normed value)" : "pre-norm input",
                     c.res_softmax.alpha, c.res_softmax.beta, c.res_lightning.alpha,
                     c.res_lightning.beta, c.res_mlp.alpha, c.res_mlp.beta);
  if (c.router == RouterKind::kSoftmax)
    s += fmt::format("experts           {} x ffn {}, top-{}, softmax router (renormalised)\n",
                     c.n_experts, c.ffn_dim, c.n_experts_active);
  else
    s += fmt::format("experts           {} x ffn {}, top-{}, sigmoid router{}, scale {:g}\n",
                     c.n_experts, c.ffn_dim, c.n_experts_active,
                     c.use_routing_bias ? " + selection bias" : "", c.routed_scaling_factor);
  s += fmt::format("vocab             {}\n", c.vocab_size);
  s += fmt::format("max positions     {}\n", c.max_position);
  s += fmt::format("rms eps           {:g}\n", c.norm_eps);
  s += fmt::format("weights           {}\n",
                   !c.fp8.enabled ? std::string("unquantized")
                   : c.fp8.mx     ? std::string("mxfp8: e4m3, one e8m0 scale per 1x32 (held as f32)")
                                  : fmt::format("fp8 e4m3, {}x{} block scales", c.fp8.block_out, c.fp8.block_in));
  if (c.n_mtp_modules)
    s += fmt::format("mtp               config declares {} modules ({})\n", c.n_mtp_modules,
                     c.family == Family::kMiniMaxM3 ? "model.mtp.* tensors are not loaded yet"
                                                    : "no weights are released; unused");
  return s;
}

}  // namespace mmx
