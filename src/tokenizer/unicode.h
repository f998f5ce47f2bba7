// UTF-8 helpers and the GPT-2 byte alphabet used by byte-level BPE.
//
// Not here: normalization (nfc.h), regexes (regex.h). All functions are pure and thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace mmx::tok {

constexpr uint32_t kReplacementChar = 0xFFFD;

// Appends code point `cp` (must be a Unicode scalar value) as UTF-8.
void utf8_append(std::string& out, uint32_t cp);

// Decodes the code point starting at s[i] of a VALID UTF-8 string and advances i past it.
uint32_t utf8_next(std::string_view s, size_t& i);

// Length in bytes of the valid UTF-8 sequence starting at s[i], or 0 when the bytes there are not
// a complete valid sequence (invalid or truncated).
size_t utf8_valid_len(std::string_view s, size_t i);

// True when `s` is entirely valid UTF-8 (no surrogates, no overlongs, <= U+10FFFF).
bool utf8_is_valid(std::string_view s);

// The input with every invalid sequence replaced by U+FFFD, one per "maximal subpart" — the rule
// of WHATWG TextDecoder, Rust's String::from_utf8_lossy and Node's Buffer.toString('utf8').
std::string utf8_lossy(std::string_view s);

// Number of bytes at the end of `s` that form an incomplete but still possibly valid UTF-8
// sequence (0..3): the part a streaming decoder must hold back until more bytes arrive.
size_t utf8_incomplete_tail(std::string_view s);

// GPT-2 byte alphabet: byte b <-> a printable code point (bytes 0x21..0x7E, 0xA1..0xAC,
// 0xAE..0xFF map to themselves; the other 68 map to U+0100.. in byte order).
const std::array<uint32_t, 256>& byte_to_codepoint();
// Code point -> byte, or -1 when cp is not in the alphabet.
int codepoint_to_byte(uint32_t cp);

// Unicode White_Space (Rust char::is_whitespace), for lstrip/rstrip of added tokens.
bool is_unicode_whitespace(uint32_t cp);

}  // namespace mmx::tok
