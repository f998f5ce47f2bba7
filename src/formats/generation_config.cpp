// generation_config.json reader (see generation_config.h).
#include "formats/generation_config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace mmx {

GenerationConfig read_generation_config(const std::string& dir) {
  GenerationConfig g;
  const std::filesystem::path path = std::filesystem::path(dir) / "generation_config.json";
  if (!std::filesystem::exists(path)) return g;
  g.where = path.string();
  std::ifstream f(path);
  const nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) fail("{}: not a JSON object", g.where);
  auto number = [&](const char* key, std::optional<float>* out) {
    if (!j.contains(key) || j[key].is_null()) return;
    if (!j[key].is_number()) fail("{}: '{}' must be a number", g.where, key);
    *out = j[key].get<float>();
  };
  number("temperature", &g.temperature);
  number("top_p", &g.top_p);
  number("min_p", &g.min_p);
  number("repetition_penalty", &g.repetition_penalty);
  if (j.contains("top_k") && !j["top_k"].is_null()) {
    if (!j["top_k"].is_number_integer()) fail("{}: 'top_k' must be an integer", g.where);
    g.top_k = j["top_k"].get<int64_t>();
  }
  return g;
}

}  // namespace mmx
