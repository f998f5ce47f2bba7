// How deeply a JSON text nests, measured on the bytes before anything parses it.
//
// nlohmann::json parses, copies and destroys values recursively, and so do our template values
// (`tojson`) and argument typing: a hostile text of 20,000 '[' overflows the stack in any of them.
// Every place that parses JSON from a client refuses texts deeper than its limit first.
#pragma once

#include <string_view>

namespace mmx {

// Deepest [ / { nesting outside strings; 0 for a scalar. Unbalanced brackets are counted as
// written (the parser rejects them later), so the result bounds the depth of any parse.
inline int json_nesting_depth(std::string_view s) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace mmx
