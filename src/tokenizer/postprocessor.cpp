// Post-processors (see postprocessor.h).
#include "tokenizer/postprocessor.h"

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace mmx::tok {

using nlohmann::json;

PostProcessor PostProcessor::from_json(const json& j) {
  PostProcessor p;
  if (!j.is_null()) p.add_json(j);
  return p;
}

void PostProcessor::add_json(const json& j) {
  const std::string type = j.value("type", "");
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    for (const json& s : j.at("processors")) add_json(s);
    return;
  }
  if (has_template_) fail("tokenizer.json: more than one template post-processor in a Sequence");
  has_template_ = true;
  if (type == "TemplateProcessing") {
    bool seen_seq = false;
    for (const json& item : j.at("single")) {
      if (item.contains("Sequence")) {
        if (item["Sequence"].value("id", "A") != "A") fail("tokenizer.json: TemplateProcessing single uses sequence B");
        seen_seq = true;
      } else if (item.contains("SpecialToken")) {
        const std::string name = item["SpecialToken"].at("id").get<std::string>();
        const json& st = j.at("special_tokens");
        if (!st.contains(name)) fail("tokenizer.json: TemplateProcessing special token '{}' is not defined", name);
        for (const json& id : st[name].at("ids")) (seen_seq ? after_ : before_).push_back(id.get<int32_t>());
      } else {
        fail("tokenizer.json: unknown TemplateProcessing item {}", item.dump());
      }
    }
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    before_.push_back(j.at("cls").at(1).get<int32_t>());
    after_.push_back(j.at("sep").at(1).get<int32_t>());
  } else {
    fail("tokenizer.json: post-processor '{}' is not supported", type);
  }
}

void PostProcessor::apply(std::vector<int32_t>& ids) const {
  if (!has_template_) return;
  ids.insert(ids.begin(), before_.begin(), before_.end());
  ids.insert(ids.end(), after_.begin(), after_.end());
}

}  // namespace mmx::tok
