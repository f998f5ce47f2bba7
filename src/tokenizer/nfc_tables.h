// Raw Unicode data for NFC (generated into nfc_tables.cpp by gen_nfc_tables.py). Sorted by code
// point; Hangul syllables are not listed (they decompose/compose algorithmically in nfc.cpp).
// Only nfc.cpp reads these; everything else calls nfc().
#pragma once

#include <cstddef>
#include <cstdint>

namespace mmx::tok::nfc_data {

struct CccEntry {
  uint32_t cp;
  uint8_t ccc;  // canonical combining class, 1..254 (0 is not listed)
};
struct DecompEntry {
  uint32_t cp;
  uint32_t offset;  // into kDecompPool: the full (recursive) canonical decomposition
  uint32_t len;
};
struct CompEntry {
  uint32_t first, second, composite;  // sorted by (first, second)
};

extern const char* const kUnicodeVersion;
extern const CccEntry kCcc[];
extern const size_t kCccCount;
extern const DecompEntry kDecomp[];
extern const size_t kDecompCount;
extern const uint32_t kDecompPool[];
extern const CompEntry kComp[];
extern const size_t kCompCount;

}  // namespace mmx::tok::nfc_data
