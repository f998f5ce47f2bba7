#include "chat_model.h"

#include "base/error.h"
#include "engine/generation_defaults.h"
#include "formats/checkpoint.h"

namespace mmx::cli {

chat::OutputFormat pick_format(Family family, const std::string& name) {
  const auto fam_default = family == Family::kMiniMaxM3       ? chat::OutputFormat::kM3
                           : family == Family::kMiniMaxText01 ? chat::OutputFormat::kM1
                                                              : chat::OutputFormat::kM2;
  if (name == "auto") return fam_default;
  const auto f = chat::output_format_from_name(name);
  if (!f) fail("--reasoning-format '{}': use minimax_m2, minimax_m2_append_think, minimax_m3 or minimax", name);
  const bool m2 = *f == chat::OutputFormat::kM2 || *f == chat::OutputFormat::kM2AppendThink;
  if (m2 != (fam_default == chat::OutputFormat::kM2) || (!m2 && *f != fam_default))
    fail("--reasoning-format '{}' does not match this model family", name);
  return *f;
}

void describe_model(const Model& model, const std::string& dir, const std::string& reasoning_format,
                    chat::ServedModel& sm) {
  const ModelConfig& cfg = model.config();
  sm.format = pick_format(cfg.family, reasoning_format);
  sm.eos_ids.clear();
  for (int64_t id : cfg.eos_token_ids) sm.eos_ids.push_back(int32_t(id));
  sm.sampling = generation_defaults(open_checkpoint(dir).generation_config());
}

}  // namespace mmx::cli
