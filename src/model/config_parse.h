// Private to src/model (config.cpp and the family files): the JSON reader and the parsing steps
// the families share. Each family file's config section fills the family-specific fields (DESIGN
// rule 5: variation is normalized here, once).
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "base/error.h"
#include "model/config.h"

namespace mmx::config_parse {

using json = nlohmann::json;

// Typed, range-checked access to one JSON object; errors name the file and the key.
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


// quantization_config (fp8 e4m3 with block scales).
void parse_fp8(const json& q, const std::string& where, ModelConfig& c);
// bos_token_id / eos_token_id (int or list; null = none), when present; each id must be in
// [0, vocab_size) (throws mmx::Error naming `where`). Needs c.vocab_size.
void parse_token_ids(const json& j, ModelConfig& c, const std::string& where);
// The attention/transformer shape keys every family has: vocab_size, hidden_size,
// num_hidden_layers, heads, head_dim, rotary_dim / partial_rotary_factor, rope_theta,
// rope_scaling (refused), max_position_embeddings, rms_norm_eps, hidden_act (silu),
// sliding windows (refused). Adds the keys it reads to `used`.
void parse_common(const json& j, const Reader& r, ModelConfig& c, std::set<std::string>& used);
// The MoE shape keys: intermediate_size, num_local_experts, num_experts_per_tok.
void parse_moe_shape(const Reader& r, ModelConfig& c, std::set<std::string>& used);
// Appends a warning for every key neither in `used` nor in `ignored`.
void warn_unknown_keys(const json& j, const std::set<std::string>& used,
                       const std::set<std::string>& ignored, ModelConfig& c, const std::string& where);

// A family's config.json parser: everything past "architectures", into c (j: the whole file;
// `where` names it in errors). Each lives in its family file (families/minimax_<family>.cpp) and
// is listed in families/registry.cpp's table under its architectures[0] strings.
using FamilyConfigParser = void (*)(const json& j, const std::string& where, ModelConfig& c);

}  // namespace mmx::config_parse
