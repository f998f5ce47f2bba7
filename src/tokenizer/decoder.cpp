// Decoders (see decoder.h).
#include "tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "tokenizer/unicode.h"

namespace mmx::tok {

using nlohmann::json;

Decoder Decoder::from_json(const json& j) {
  Decoder d;
  if (j.is_null()) return d;
  const std::string type = j.value("type", "");
  if (type == "ByteLevel") {
    d.byte_level_ = true;
  } else if (type == "Sequence" && j.at("decoders").size() == 1 && j["decoders"][0].value("type", "") == "ByteLevel") {
    d.byte_level_ = true;
  } else {
    fail("tokenizer.json: decoder '{}' is not supported (supported: ByteLevel, null)", type);
  }
  return d;
}

void Decoder::token_bytes(std::string_view token, std::string& out) {
  const size_t mark = out.size();
  size_t i = 0;
  if (utf8_is_valid(token)) {
    while (i < token.size()) {
      const int b = codepoint_to_byte(utf8_next(token, i));
      if (b < 0) {  // not an alphabet string: the token's own UTF-8
        out.resize(mark);
        out.append(token);
        return;
      }
      out.push_back(char(b));
    }
    return;
  }
  out.append(token);
}

}  // namespace mmx::tok
