// UTF-8 helpers and the GPT-2 byte alphabet.
#include <gtest/gtest.h>

#include "tokenizer/unicode.h"

using namespace mmx::tok;

TEST(Unicode, AppendAndNextRoundTrip) {
  for (uint32_t cp : {0x41u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFDu, 0x10000u, 0x1F600u, 0x10FFFFu}) {
    std::string s;
    utf8_append(s, cp);
    size_t i = 0;
    EXPECT_EQ(utf8_next(s, i), cp);
    EXPECT_EQ(i, s.size());
    EXPECT_TRUE(utf8_is_valid(s));
  }
}

TEST(Unicode, ValidityRejectsSurrogatesOverlongsAndTooLarge) {
  EXPECT_FALSE(utf8_is_valid("\xED\xA0\x80"));      // surrogate U+D800
  EXPECT_FALSE(utf8_is_valid("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(utf8_is_valid("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(utf8_is_valid("\xE2\x82"));          // truncated
  EXPECT_TRUE(utf8_is_valid("\xE2\x82\xAC"));       // euro
}

TEST(Unicode, LossyReplacesMaximalSubparts) {
  // WHATWG / Rust from_utf8_lossy: "E2 82" (truncated) is one U+FFFD; "ED A0 80" is three.
  EXPECT_EQ(utf8_lossy("a\xE2\x82" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98"), "\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("ok \xF0\x9F\x98\x80"), "ok \xF0\x9F\x98\x80");
}

TEST(Unicode, IncompleteTail) {
  EXPECT_EQ(utf8_incomplete_tail("abc"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("a\xF0"), 1u);
  EXPECT_EQ(utf8_incomplete_tail("a\xF0\x9F"), 2u);
  EXPECT_EQ(utf8_incomplete_tail("a\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8_incomplete_tail("a\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("a\xE0\x80"), 0u);  // invalid, not incomplete: emit now
  EXPECT_EQ(utf8_incomplete_tail("\x80\x80\x80"), 0u);
}

TEST(Unicode, ByteAlphabetIsABijection) {
  const auto& a = byte_to_codepoint();
  EXPECT_EQ(a[' '], 0x120u);  // 'Ġ'
  EXPECT_EQ(a['\n'], 0x10Au);  // 'Ċ'
  EXPECT_EQ(a['A'], uint32_t('A'));
  for (int b = 0; b < 256; ++b) EXPECT_EQ(codepoint_to_byte(a[b]), b);
  EXPECT_EQ(codepoint_to_byte(0x20), -1);
}
