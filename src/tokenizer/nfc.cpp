// NFC normalization (see nfc.h). Algorithm of UAX #15: decompose every code point fully, sort
// runs of non-starters by combining class (stable), then compose starter + unblocked marks.
#include "tokenizer/nfc.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "tokenizer/nfc_tables.h"
#include "tokenizer/unicode.h"

namespace mmx::tok {

namespace {

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

struct Tables {
  std::vector<uint8_t> non_inert;  // bit per code point: needs the full algorithm
  std::unordered_map<uint32_t, uint8_t> ccc;
  std::unordered_map<uint32_t, std::pair<uint32_t, uint32_t>> decomp;  // offset, len
  std::unordered_map<uint64_t, uint32_t> comp;                         // (first<<32|second) -> composite

  void mark(uint32_t cp) { non_inert[cp >> 3] |= uint8_t(1u << (cp & 7)); }
  Tables() : non_inert(0x110000 / 8, 0) {
    using namespace nfc_data;
    for (size_t i = 0; i < kCccCount; ++i) ccc[kCcc[i].cp] = kCcc[i].ccc, mark(kCcc[i].cp);
    for (size_t i = 0; i < kDecompCount; ++i) decomp[kDecomp[i].cp] = {kDecomp[i].offset, kDecomp[i].len}, mark(kDecomp[i].cp);
    for (size_t i = 0; i < kCompCount; ++i) {
      comp[(uint64_t(kComp[i].first) << 32) | kComp[i].second] = kComp[i].composite;
      mark(kComp[i].second);
    }
    for (uint32_t cp = kSBase; cp < kSBase + kSCount; ++cp) mark(cp);
    for (uint32_t cp = kVBase; cp < kVBase + kVCount; ++cp) mark(cp);
    for (uint32_t cp = kTBase + 1; cp < kTBase + kTCount; ++cp) mark(cp);
  }
  bool is_inert(uint32_t cp) const { return !(non_inert[cp >> 3] & (1u << (cp & 7))); }
  uint8_t ccc_of(uint32_t cp) const {
    if (is_inert(cp)) return 0;
    auto it = ccc.find(cp);
    return it == ccc.end() ? 0 : it->second;
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

void decompose(const Tables& t, uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  auto it = t.decomp.find(cp);
  if (it == t.decomp.end()) return out.push_back(cp);
  for (uint32_t k = 0; k < it->second.second; ++k) out.push_back(nfc_data::kDecompPool[it->second.first + k]);
}

uint32_t compose_pair(const Tables& t, uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  auto it = t.comp.find((uint64_t(a) << 32) | b);
  return it == t.comp.end() ? 0 : it->second;
}

// Full NFC of a span of code points, appended to out as UTF-8.
void nfc_span(const Tables& t, const std::vector<uint32_t>& cps, std::string& out) {
  std::vector<uint32_t> d;
  for (uint32_t cp : cps) decompose(t, cp, d);
  // canonical ordering: stable sort each run of non-starters by ccc
  for (size_t i = 0; i < d.size();) {
    if (t.ccc_of(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && t.ccc_of(d[j]) != 0) ++j;
    std::stable_sort(d.begin() + i, d.begin() + j, [&](uint32_t a, uint32_t b) { return t.ccc_of(a) < t.ccc_of(b); });
    i = j;
  }
  // canonical composition
  std::vector<uint32_t> r;
  int64_t starter = -1;  // index in r of the last starter
  int last_ccc = -1;     // ccc of the last char appended after the starter (-1: none)
  for (uint32_t cp : d) {
    const int c = t.ccc_of(cp);
    if (starter >= 0) {
      const bool blocked = last_ccc != -1 && (last_ccc == 0 || last_ccc >= c);
      if (!blocked) {
        if (uint32_t x = compose_pair(t, r[starter], cp)) {
          r[starter] = x;
          continue;
        }
      }
    }
    r.push_back(cp);
    if (c == 0) {
      starter = int64_t(r.size()) - 1;
      last_ccc = -1;
    } else {
      last_ccc = c;
    }
  }
  for (uint32_t cp : r) utf8_append(out, cp);
}

}  // namespace

std::string nfc(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && uint8_t(s[i]) < 0x80) ++i;  // ASCII prefix is always final
  if (i == s.size()) return std::string(s);
  const Tables& t = tables();
  std::string out(s.substr(0, i));
  out.reserve(s.size());
  std::vector<uint32_t> span;
  // start of the code point just copied through (it may still compose with what follows)
  size_t last_start = i > 0 ? i - 1 : std::string::npos;
  while (i < s.size()) {
    const size_t start = i;
    const uint32_t cp = utf8_next(s, i);
    if (t.is_inert(cp)) {
      out.append(s.substr(start, i - start));
      last_start = start;
      continue;
    }
    // A non-inert char may compose with the previous (inert) starter: re-open it.
    span.clear();
    if (last_start != std::string::npos) {
      const size_t prev_len = start - last_start;
      out.resize(out.size() - prev_len);
      size_t k = last_start;
      span.push_back(utf8_next(s, k));
    }
    span.push_back(cp);
    while (i < s.size()) {
      size_t k = i;
      const uint32_t c2 = utf8_next(s, k);
      if (t.is_inert(c2)) break;
      span.push_back(c2);
      i = k;
    }
    nfc_span(t, span, out);
    last_start = std::string::npos;
  }
  return out;
}

}  // namespace mmx::tok
