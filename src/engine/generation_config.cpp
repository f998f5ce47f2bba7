#include "engine/generation_config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace mmx {

SamplingParams generation_defaults(const std::string& dir) {
  SamplingParams p;
  const std::filesystem::path path = std::filesystem::path(dir) / "generation_config.json";
  if (!std::filesystem::exists(path)) return p;
  std::ifstream f(path);
  const nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) fail("{}: not a JSON object", path.string());
  auto number = [&](const char* key, float* out) {
    if (!j.contains(key) || j[key].is_null()) return;
    if (!j[key].is_number()) fail("{}: '{}' must be a number", path.string(), key);
    *out = j[key].get<float>();
  };
  number("temperature", &p.temperature);
  number("top_p", &p.top_p);
  number("min_p", &p.min_p);
  number("repetition_penalty", &p.repetition_penalty);
  if (j.contains("top_k") && !j["top_k"].is_null()) {
    if (!j["top_k"].is_number_integer()) fail("{}: 'top_k' must be an integer", path.string());
    const int64_t k = j["top_k"].get<int64_t>();
    p.top_k = k <= 0 ? 0 : int(std::min<int64_t>(k, 1 << 30));  // HF: 0 (or -1 in vLLM) = off
  }
  try {
    validate_sampling(p);
  } catch (const Error& e) {
    fail("{}: {}", path.string(), e.what());
  }
  return p;
}

}  // namespace mmx
