// NFC normalization against hand-derived cases (UAX #15 examples).
#include <gtest/gtest.h>

#include "tokenizer/nfc.h"

using mmx::tok::nfc;

TEST(Nfc, AsciiAndCjkPassThrough) {
  EXPECT_EQ(nfc("hello world"), "hello world");
  EXPECT_EQ(nfc("日本語 中文"), "日本語 中文");
  EXPECT_EQ(nfc(""), "");
}

TEST(Nfc, ComposesBaseAndMark) {
  EXPECT_EQ(nfc("e\u0301"), "\u00e9");
  EXPECT_EQ(nfc("A\u030a"), "\u00c5");
  EXPECT_EQ(nfc("\u212b"), "\u00c5");                  // Angstrom sign: singleton decomposition
  EXPECT_EQ(nfc("\u1e0a\u0323"), "\u1e0c\u0307");      // reorder: dot below (220) before dot above (230)
  EXPECT_EQ(nfc("D\u0307\u0323"), "\u1e0c\u0307");
  EXPECT_EQ(nfc("a\u0300\u0301"), "\u00e0\u0301");     // second mark blocked by same class
}

TEST(Nfc, HangulAlgorithmic) {
  EXPECT_EQ(nfc("\u1100\u1161"), "\uac00");
  EXPECT_EQ(nfc("\u1100\u1161\u11a8"), "\uac01");
  EXPECT_EQ(nfc("\uac00\u11a8"), "\uac01");
}

TEST(Nfc, ExclusionsStayDecomposed) {
  EXPECT_EQ(nfc("\u0958"), "\u0915\u093c");  // composition exclusion
  EXPECT_EQ(nfc("\u0344"), "\u0308\u0301");  // non-starter decomposition
}
