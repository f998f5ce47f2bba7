// UTF-8 helpers and the GPT-2 byte alphabet (see unicode.h).
#include "tokenizer/unicode.h"

namespace mmx::tok {

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

uint32_t utf8_next(std::string_view s, size_t& i) {
  const auto b = [&](size_t k) { return uint32_t(uint8_t(s[k])); };
  const uint32_t c = b(i);
  if (c < 0x80) return ++i, c;
  if (c < 0xE0) {
    const uint32_t cp = ((c & 0x1F) << 6) | (b(i + 1) & 0x3F);
    i += 2;
    return cp;
  }
  if (c < 0xF0) {
    const uint32_t cp = ((c & 0x0F) << 12) | ((b(i + 1) & 0x3F) << 6) | (b(i + 2) & 0x3F);
    i += 3;
    return cp;
  }
  const uint32_t cp = ((c & 0x07) << 18) | ((b(i + 1) & 0x3F) << 12) | ((b(i + 2) & 0x3F) << 6) | (b(i + 3) & 0x3F);
  i += 4;
  return cp;
}

namespace {
// For a lead byte: the sequence length and the allowed range of the SECOND byte (Unicode
// Table 3-7, well-formed UTF-8). len 0 = never valid as a lead.
struct Lead {
  uint8_t len, lo, hi;
};
Lead lead_info(uint8_t c) {
  if (c < 0x80) return {1, 0, 0};
  if (c < 0xC2) return {0, 0, 0};
  if (c < 0xE0) return {2, 0x80, 0xBF};
  if (c == 0xE0) return {3, 0xA0, 0xBF};
  if (c == 0xED) return {3, 0x80, 0x9F};
  if (c < 0xF0) return {3, 0x80, 0xBF};
  if (c == 0xF0) return {4, 0x90, 0xBF};
  if (c < 0xF4) return {4, 0x80, 0xBF};
  if (c == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}
// Number of bytes of s[i..] that form a valid prefix of the sequence (the "maximal subpart"), and
// whether that prefix is the complete sequence.
size_t valid_prefix(std::string_view s, size_t i, bool& complete) {
  const Lead L = lead_info(uint8_t(s[i]));
  complete = false;
  if (L.len == 0) return 0;
  if (L.len == 1) return complete = true, 1;
  size_t k = 1;
  for (; k < L.len && i + k < s.size(); ++k) {
    const uint8_t c = uint8_t(s[i + k]);
    const uint8_t lo = k == 1 ? L.lo : 0x80, hi = k == 1 ? L.hi : 0xBF;
    if (c < lo || c > hi) return k;
  }
  complete = k == L.len;
  return k;
}
}  // namespace

size_t utf8_valid_len(std::string_view s, size_t i) {
  bool complete;
  const size_t n = valid_prefix(s, i, complete);
  return complete ? n : 0;
}

bool utf8_is_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (uint8_t(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = utf8_valid_len(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (uint8_t(s[i]) < 0x80) {
      out.push_back(s[i++]);
      continue;
    }
    bool complete;
    const size_t n = valid_prefix(s, i, complete);
    if (complete) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      utf8_append(out, kReplacementChar);
      i += n == 0 ? 1 : n;  // a maximal subpart is replaced as one unit
    }
  }
  return out;
}

size_t utf8_incomplete_tail(std::string_view s) {
  // A lead byte within the last 3 bytes whose sequence is a valid but truncated prefix.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const size_t i = s.size() - back;
    const uint8_t c = uint8_t(s[i]);
    if (c >= 0x80 && c < 0xC0) continue;  // continuation byte: keep looking for the lead
    bool complete;
    const size_t n = valid_prefix(s, i, complete);
    return (!complete && n == back) ? back : 0;
  }
  return 0;
}

namespace {
struct ByteTables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> from_cp{};  // cp < 324 covers the whole alphabet
  ByteTables() {
    from_cp.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = keep ? uint32_t(b) : next++;
      from_cp[to_cp[b]] = int16_t(b);
    }
  }
};
const ByteTables& byte_tables() {
  static const ByteTables t;
  return t;
}
}  // namespace

const std::array<uint32_t, 256>& byte_to_codepoint() { return byte_tables().to_cp; }

int codepoint_to_byte(uint32_t cp) { return cp < 324 ? byte_tables().from_cp[cp] : -1; }

bool is_unicode_whitespace(uint32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace mmx::tok
