// config.json -> ModelConfig: the released M2 values, and refusals of values with real effect.
#include "model/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "model/weights.h"

namespace mmx {
namespace {

using json = nlohmann::json;

// The released MiniMax-M2 config.json values (spec §4.1).
json real_m2() {
  return {{"architectures", {"MiniMaxM2ForCausalLM"}},
          {"model_type", "minimax_m2"},
          {"hidden_size", 3072},
          {"num_hidden_layers", 62},
          {"num_attention_heads", 48},
          {"num_key_value_heads", 8},
          {"head_dim", 128},
          {"rotary_dim", 64},
          {"rope_theta", 5000000},
          {"max_position_embeddings", 196608},
          {"intermediate_size", 1536},
          {"num_local_experts", 256},
          {"num_experts_per_tok", 8},
          {"shared_intermediate_size", 0},
          {"scoring_func", "sigmoid"},
          {"use_routing_bias", true},
          {"use_qk_norm", true},
          {"qk_norm_type", "per_layer"},
          {"hidden_act", "silu"},
          {"rms_norm_eps", 1e-6},
          {"attn_type_list", std::vector<int>(62, 1)},
          {"use_mtp", true},
          {"num_mtp_modules", 3},
          {"mtp_transformer_layers", 1},
          {"vocab_size", 200064},
          {"tie_word_embeddings", false},
          {"router_aux_loss_coef", 0.001},
          {"router_jitter_noise", 0.0},
          {"bos_token_id", 200034},
          {"eos_token_id", 200020},
          {"torch_dtype", "bfloat16"},
          {"quantization_config",
           {{"quant_method", "fp8"},
            {"fmt", "float8_e4m3fn"},
            {"activation_scheme", "dynamic"},
            {"weight_block_size", {128, 128}},
            {"modules_to_not_convert", {"gate", "e_score_correction_bias", "lm_head"}}}}};
}

std::string error_of(const json& j) {
  try {
    parse_config(j.dump(), "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, ParsesRealM2) {
  const ModelConfig c = parse_config(real_m2().dump(), "config.json");
  EXPECT_EQ(c.d_model, 3072);
  EXPECT_EQ(c.n_layers, 62);
  EXPECT_EQ(c.n_heads, 48);
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rotary_dim, 64);
  EXPECT_EQ(c.q_dim(), 6144);
  EXPECT_EQ(c.kv_dim(), 1024);
  EXPECT_DOUBLE_EQ(c.rope_theta, 5e6);
  EXPECT_EQ(c.n_experts, 256);
  EXPECT_EQ(c.n_experts_active, 8);
  EXPECT_EQ(c.ffn_dim, 1536);
  EXPECT_TRUE(c.fp8.enabled);
  EXPECT_EQ(c.fp8.block_out, 128);
  EXPECT_EQ(c.fp8.block_in, 128);
  EXPECT_EQ(c.bos_token_id, 200034);
  ASSERT_EQ(c.eos_token_ids.size(), 1u);
  EXPECT_EQ(c.eos_token_ids[0], 200020);
  EXPECT_FLOAT_EQ(c.routed_scaling_factor, 1.0f);
  EXPECT_TRUE(c.warnings.empty()) << c.warnings[0];
}

// Published: 229.9B total, ~10B (9.8B) active. Counted from the config, embedding and lm_head
// are 0.615B each; 9.8B active matches the layers alone (no embedding / lm_head).
TEST(Config, ParamCountsMatchPublishedM2) {
  const ParamCounts p = count_params(parse_config(real_m2().dump(), "config.json"));
  EXPECT_EQ(p.embedding, 200064LL * 3072);
  EXPECT_NEAR(double(p.active_no_embed()) / 1e9, 9.8, 0.05);
  EXPECT_NEAR(double(p.total()) / 1e9, 228.7, 0.1);
}

TEST(Config, RefusesWhatItCannotRun) {
  auto with = [](const char* key, json v) {
    json j = real_m2();
    j[key] = v;
    return error_of(j);
  };
  EXPECT_NE(with("architectures", {"LlamaForCausalLM"}).find("not supported"), std::string::npos);
  EXPECT_NE(with("qk_norm_type", "per_head").find("qk_norm_type"), std::string::npos);
  EXPECT_NE(with("scoring_func", "softmax").find("scoring_func"), std::string::npos);
  EXPECT_NE(with("hidden_act", "gelu").find("hidden_act"), std::string::npos);
  EXPECT_NE(with("shared_intermediate_size", 1536).find("shared"), std::string::npos);
  EXPECT_NE(with("rope_scaling", {{"type", "yarn"}}).find("rope_scaling"), std::string::npos);
  EXPECT_NE(with("sliding_window", 4096).find("sliding"), std::string::npos);
  EXPECT_NE(with("attn_type_list", std::vector<int>(62, 0)).find("Lightning"), std::string::npos);
  EXPECT_NE(with("num_attention_heads", 47).find("multiple"), std::string::npos);
  EXPECT_NE(with("hidden_size", "3072").find("integer"), std::string::npos);
  EXPECT_NE(with("num_hidden_layers", -1).find("range"), std::string::npos);
  EXPECT_NE(with("rotary_dim", 65).find("rotary_dim"), std::string::npos);
  // Token ids that could never be produced or are not ids (hardening issue, finding 8): refused,
  // not silently dropped (an ignored eos never stops generation).
  EXPECT_NE(with("eos_token_id", 200064).find("eos_token_id"), std::string::npos);  // == vocab_size
  EXPECT_NE(with("eos_token_id", -1).find("eos_token_id"), std::string::npos);
  EXPECT_NE(with("eos_token_id", "200020").find("eos_token_id"), std::string::npos);
  EXPECT_NE(with("eos_token_id", json::array({200020, 1.5})).find("eos_token_id"), std::string::npos);
  EXPECT_NE(with("bos_token_id", 1e12).find("bos_token_id"), std::string::npos);
  EXPECT_EQ(with("eos_token_id", json::array({200020, 200019})), "");
  EXPECT_EQ(with("eos_token_id", nullptr), "");
  json j = real_m2();
  j.erase("hidden_size");
  EXPECT_NE(error_of(j).find("hidden_size"), std::string::npos);
  j = real_m2();
  j["quantization_config"]["quant_method"] = "awq";
  EXPECT_NE(error_of(j).find("awq"), std::string::npos);
  j = real_m2();
  j["quantization_config"]["weight_block_size"] = {128};
  EXPECT_NE(error_of(j).find("weight_block_size"), std::string::npos);
  EXPECT_NE(error_of(json::array()).find("object"), std::string::npos);
  try {
    parse_config("{not json", "x/config.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x/config.json"), std::string::npos);
  }
}

TEST(Config, WarnsOnUnknownKeys) {
  json j = real_m2();
  j["mystery_knob"] = 3;
  const ModelConfig c = parse_config(j.dump(), "config.json");
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("mystery_knob"), std::string::npos);
}

}  // namespace
}  // namespace mmx
