// Unicode NFC (canonical decomposition, canonical ordering, canonical composition) of UTF-8 text.
//
// Data: nfc_tables.cpp, generated from Python's unicodedata (version in kUnicodeVersion). Text
// made only of "inert" code points (starters that never decompose and never compose with a
// predecessor — e.g. all ASCII, most CJK) is copied through; only the spans around other
// characters go through the full algorithm.
#pragma once

#include <string>
#include <string_view>

namespace mmx::tok {

// `s` must be valid UTF-8. Returns its NFC form.
std::string nfc(std::string_view s);

}  // namespace mmx::tok
