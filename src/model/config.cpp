// config.json -> ModelConfig for MiniMaxM2ForCausalLM (spec §4.1).
#include "model/config.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/error.h"

namespace mmx {

using json = nlohmann::json;

namespace {

// Keys with no effect on inference math (training knobs, bookkeeping, vestigial Text-01 keys).
const std::set<std::string> kIgnoredKeys = {
    "model_type", "auto_map", "torch_dtype", "dtype", "transformers_version", "use_cache",
    "router_aux_loss_coef", "router_jitter_noise", "output_router_logits", "initializer_range",
    "attention_dropout", "pad_token_id", "max_model_len", "layernorm_full_attention_beta",
    "layernorm_linear_attention_beta", "layernorm_mlp_beta", "shared_moe_mode", "swa_rope_theta",
    "use_mtp", "mtp_transformer_layers", "num_mtp_modules", "mlp_intermediate_size",
    "_name_or_path", "architectures", "name_or_path", "bos_token_id", "eos_token_id",
    "partial_rotary_factor", "use_grouped_topk",
};

class Reader {
 public:
  Reader(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    if (!has(key)) fail("{}: missing required key \"{}\"", where_, key);
    return integer_or(key, 0, lo, hi);
  }
  int64_t integer_or(const char* key, int64_t def, int64_t lo, int64_t hi) const {
    if (!has(key)) return def;
    const json& v = j_.at(key);
    if (!v.is_number_integer() && !(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()))
      fail("{}: \"{}\" must be an integer, got {}", where_, key, v.dump());
    const double d = v.get<double>();
    if (d < double(lo) || d > double(hi))
      fail("{}: \"{}\" = {} is outside the supported range [{}, {}]", where_, key, v.dump(), lo, hi);
    return int64_t(d);
  }
  double number_or(const char* key, double def) const {
    if (!has(key)) return def;
    const json& v = j_.at(key);
    if (!v.is_number()) fail("{}: \"{}\" must be a number, got {}", where_, key, v.dump());
    return v.get<double>();
  }
  bool boolean_or(const char* key, bool def) const {
    if (!has(key)) return def;
    const json& v = j_.at(key);
    if (!v.is_boolean()) fail("{}: \"{}\" must be true or false, got {}", where_, key, v.dump());
    return v.get<bool>();
  }
  std::string string_or(const char* key, const std::string& def) const {
    if (!has(key)) return def;
    const json& v = j_.at(key);
    if (!v.is_string()) fail("{}: \"{}\" must be a string, got {}", where_, key, v.dump());
    return v.get<std::string>();
  }
  const std::string& where() const { return where_; }

 private:
  const json& j_;
  std::string where_;
};

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

void parse_token_ids(const json& j, ModelConfig& c) {
  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer())
    c.bos_token_id = j["bos_token_id"].get<int64_t>();
  if (j.contains("eos_token_id")) {
    const json& e = j["eos_token_id"];
    if (e.is_number_integer()) c.eos_token_ids.push_back(e.get<int64_t>());
    else if (e.is_array())
      for (const auto& v : e)
        if (v.is_number_integer()) c.eos_token_ids.push_back(v.get<int64_t>());
  }
}

}  // namespace

ModelConfig parse_config(const std::string& text, const std::string& where) {
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
  if (c.architecture != "MiniMaxM2ForCausalLM")
    fail("{}: architecture \"{}\" is not supported yet (supported: MiniMaxM2ForCausalLM)", where,
         c.architecture);
  c.family = Family::kMiniMaxM2;

  const Reader r(j, where);
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
    fail("{}: rope_scaling is set ({}); RoPE scaling is not supported for MiniMax-M2 (the released "
         "configs have none)", where, j["rope_scaling"].dump());
  c.max_position = r.integer_or("max_position_embeddings", 196608, 1, kBig);
  c.norm_eps = float(r.number_or("rms_norm_eps", 1e-6));
  if (!(c.norm_eps > 0)) fail("{}: rms_norm_eps must be > 0", where);

  const std::string act = r.string_or("hidden_act", "silu");
  if (act != "silu") fail("{}: hidden_act \"{}\" is not supported (MiniMax-M2 uses silu)", where, act);

  c.use_qk_norm = r.boolean_or("use_qk_norm", true);
  const std::string qk = r.string_or("qk_norm_type", "per_layer");
  if (c.use_qk_norm && qk != "per_layer")
    fail("{}: qk_norm_type \"{}\" is not supported for MiniMaxM2ForCausalLM (expected per_layer: one "
         "RMS statistic over the whole q/k projection, spec §4.4)", where, qk);
  for (const char* k : {"sliding_window", "attn_window_size"})
    if (r.has(k)) fail("{}: \"{}\" is set; sliding-window attention is not supported for MiniMax-M2", where, k);

  c.layer_kinds.assign(c.n_layers, LayerKind::kSoftmax);
  if (r.has("attn_type_list")) {
    const json& a = j["attn_type_list"];
    if (!a.is_array() || int(a.size()) != c.n_layers)
      fail("{}: attn_type_list must list {} entries (one per layer)", where, c.n_layers);
    for (int il = 0; il < c.n_layers; ++il)
      if (a[il] != 1)
        fail("{}: attn_type_list[{}] = {}; MiniMax-M2 layers are all softmax attention (1). Lightning "
             "layers (0) belong to MiniMax-Text-01/M1", where, il, a[il].dump());
  }

  c.ffn_dim = r.integer("intermediate_size", 1, 1 << 20);
  c.n_experts = int(r.integer("num_local_experts", 1, 65536));
  c.n_experts_active = int(r.integer("num_experts_per_tok", 1, c.n_experts));
  const std::string scoring = r.string_or("scoring_func", "sigmoid");
  if (scoring != "sigmoid")
    fail("{}: scoring_func \"{}\" is not supported for MiniMax-M2 (expected sigmoid)", where, scoring);
  c.use_routing_bias = r.boolean_or("use_routing_bias", true);
  c.routed_scaling_factor = float(r.number_or("routed_scaling_factor", 1.0));
  if (r.integer_or("shared_intermediate_size", 0, 0, 1 << 20) != 0)
    fail("{}: shared_intermediate_size != 0 (a shared expert) is not supported for MiniMax-M2", where);
  if (r.integer_or("num_expert_group", 1, 1, 65536) > 1 || r.integer_or("topk_group", 1, 1, 65536) > 1)
    fail("{}: group-limited routing (num_expert_group/topk_group > 1) is not supported", where);

  c.tie_word_embeddings = r.boolean_or("tie_word_embeddings", false);
  if (j.contains("quantization_config") && !j["quantization_config"].is_null())
    parse_fp8(j["quantization_config"], where, c);
  parse_token_ids(j, c);
  c.n_mtp_modules = r.boolean_or("use_mtp", false) ? int(r.integer_or("num_mtp_modules", 0, 0, 64)) : 0;

  static const std::set<std::string> kUsed = {
      "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
      "head_dim", "rotary_dim", "rope_theta", "rope_scaling", "max_position_embeddings",
      "rms_norm_eps", "hidden_act", "use_qk_norm", "qk_norm_type", "sliding_window",
      "attn_window_size", "attn_type_list", "intermediate_size", "num_local_experts",
      "num_experts_per_tok", "scoring_func", "use_routing_bias", "routed_scaling_factor",
      "shared_intermediate_size", "num_expert_group", "topk_group", "tie_word_embeddings",
      "quantization_config"};
  for (const auto& [key, _] : j.items())
    if (!kUsed.count(key) && !kIgnoredKeys.count(key))
      c.warnings.push_back(fmt::format("{}: unknown key \"{}\" ignored", where, key));
  return c;
}

ModelConfig load_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  std::ifstream f(path);
  if (!f) fail("cannot open {}: is {} a Hugging Face checkpoint directory?", path, dir);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_config(ss.str(), path);
}

std::string config_summary(const ModelConfig& c) {
  std::string s;
  s += fmt::format("architecture      {}\n", c.architecture);
  s += fmt::format("layers            {} (softmax GQA attention)\n", c.n_layers);
  s += fmt::format("d_model           {}\n", c.d_model);
  s += fmt::format("heads             {} q / {} kv, head_dim {}, rotary_dim {} (neox), theta {:g}\n",
                   c.n_heads, c.n_kv_heads, c.head_dim, c.rotary_dim, c.rope_theta);
  s += fmt::format("qk-norm           {}\n", c.use_qk_norm ? "whole projection (per_layer)" : "none");
  s += fmt::format("experts           {} x ffn {}, top-{}, sigmoid router{}, scale {:g}\n",
                   c.n_experts, c.ffn_dim, c.n_experts_active,
                   c.use_routing_bias ? " + selection bias" : "", c.routed_scaling_factor);
  s += fmt::format("vocab             {}\n", c.vocab_size);
  s += fmt::format("max positions     {}\n", c.max_position);
  s += fmt::format("rms eps           {:g}\n", c.norm_eps);
  s += fmt::format("weights           {}\n",
                   c.fp8.enabled ? fmt::format("fp8 e4m3, {}x{} block scales", c.fp8.block_out, c.fp8.block_in)
                                 : std::string("unquantized"));
  if (c.n_mtp_modules)
    s += fmt::format("mtp               config declares {} modules (no weights are released; unused)\n",
                     c.n_mtp_modules);
  return s;
}

}  // namespace mmx
