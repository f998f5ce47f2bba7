// Normalizers (see normalizer.h).
#include "tokenizer/normalizer.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "tokenizer/nfc.h"

namespace mmx::tok {

using nlohmann::json;

Normalizer Normalizer::from_json(const json& j) {
  Normalizer n;
  if (!j.is_null()) n.add_json(j);
  return n;
}

void Normalizer::add_json(const json& j) {
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const json& s : j.at("normalizers")) add_json(s);
  } else if (type == "NFC") {
    steps_.push_back({Kind::kNfc, {}, {}});
  } else if (type == "Replace") {
    const json& pat = j.at("pattern");
    if (!pat.contains("String")) fail("tokenizer.json: Replace normalizer with a Regex pattern is not supported");
    const std::string p = pat.at("String").get<std::string>();
    if (p.empty()) fail("tokenizer.json: Replace normalizer with an empty pattern");
    steps_.push_back({Kind::kReplace, p, j.at("content").get<std::string>()});
  } else if (type == "Prepend") {
    steps_.push_back({Kind::kPrepend, j.at("prepend").get<std::string>(), {}});
  } else {
    fail("tokenizer.json: normalizer '{}' is not supported (supported: NFC, Replace(String), Prepend, Sequence)", type);
  }
}

void Normalizer::apply(std::string_view in, std::string& out) const {
  out.assign(in);
  std::string tmp;
  for (const Step& s : steps_) {
    switch (s.kind) {
      case Kind::kNfc:
        out = nfc(out);
        break;
      case Kind::kReplace: {
        tmp.clear();
        size_t pos = 0;
        for (size_t f = out.find(s.a); f != std::string::npos; f = out.find(s.a, pos)) {
          tmp.append(out, pos, f - pos);
          tmp += s.b;
          pos = f + s.a.size();
        }
        tmp.append(out, pos, std::string::npos);
        out.swap(tmp);
        break;
      }
      case Kind::kPrepend:
        if (!out.empty()) out.insert(0, s.a);
        break;
    }
  }
}

}  // namespace mmx::tok
