// Post-processors of HF tokenizer.json, applied only when encode(..., add_special_tokens=true)
// and only to single sequences. Supported: TemplateProcessing (the "single" template),
// RobertaProcessing / BertProcessing (cls A sep), ByteLevel (no effect on ids: it only adjusts
// offsets), Sequence, null. Anything else is refused with mmx::Error at load.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <cstdint>
#include <vector>

namespace mmx::tok {

class PostProcessor {
 public:
  PostProcessor() = default;  // no-op
  static PostProcessor from_json(const nlohmann::json& j);
  // Wraps `ids` (the encoded sequence) with the template's special tokens.
  void apply(std::vector<int32_t>& ids) const;

 private:
  void add_json(const nlohmann::json& j);
  bool has_template_ = false;
  std::vector<int32_t> before_, after_;  // ids placed before / after the sequence
};

}  // namespace mmx::tok
