// Model families by HF architectures[0] string. A name, once registered, is never renamed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/config_parse.h"
#include "model/model.h"
#include "model/weights.h"

namespace mmx {

// One row per family (registry.cpp): what its config.json says it is, and its two entry points,
// both in its family file (families/minimax_<family>.cpp). Adding a family: that file, its
// schema table (model/schema.cpp), its row here and its Family value (model/config.h).
struct FamilyInfo {
  Family family;
  std::vector<std::string> architectures;  // HF architectures[0] strings; never renamed
  config_parse::FamilyConfigParser parse_config;
  std::unique_ptr<Model> (*make)(ModelConfig cfg, ModelWeights weights);
};

// The row whose architectures hold `architecture`; null when no family has it.
const FamilyInfo* find_family(const std::string& architecture);
// Every registered architecture string, comma-separated in table order (for error messages).
std::string supported_architectures();

}  // namespace mmx
