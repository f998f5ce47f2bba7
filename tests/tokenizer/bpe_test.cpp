// BPE merge order on hand-built vocabularies (char mode and byte-level mode).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "tokenizer/bpe.h"

using namespace mmx::tok;
using nlohmann::json;

namespace {
std::vector<int32_t> enc(const BpeModel& m, std::string_view s) {
  std::vector<int32_t> out;
  m.encode_piece(s, out, nullptr);
  return out;
}
}  // namespace

TEST(Bpe, LowestRankFirstLeftmostOnTies) {
  const json model = {{"type", "BPE"},
                      {"vocab", {{"a", 0}, {"b", 1}, {"aa", 2}, {"ab", 3}, {"aab", 4}}},
                      {"merges", {"a a", "a b", "aa b"}}};
  const BpeModel m = BpeModel::from_json(model, false);
  EXPECT_EQ(enc(m, "aaa"), (std::vector<int32_t>{2, 0}));  // leftmost "a a" first
  EXPECT_EQ(enc(m, "aab"), (std::vector<int32_t>{4}));
  EXPECT_EQ(enc(m, "ab"), (std::vector<int32_t>{3}));
  EXPECT_EQ(enc(m, "aaaa"), (std::vector<int32_t>{2, 2}));
}

TEST(Bpe, PairFormMergesAndUnknownCharsDropped) {
  const json model = {{"type", "BPE"}, {"vocab", {{"x", 0}, {"y", 1}, {"xy", 2}}}, {"merges", json::array({json::array({"x", "y"})})}};
  const BpeModel m = BpeModel::from_json(model, false);
  EXPECT_EQ(enc(m, "xyzxy"), (std::vector<int32_t>{2, 2}));  // 'z' has no id and no unk: dropped (HF)
}

TEST(Bpe, UnkAndFuseUnk) {
  json model = {{"type", "BPE"}, {"vocab", {{"<unk>", 0}, {"a", 1}}}, {"merges", json::array()}, {"unk_token", "<unk>"}};
  EXPECT_EQ(enc(BpeModel::from_json(model, false), "a??a"), (std::vector<int32_t>{1, 0, 0, 1}));
  model["fuse_unk"] = true;
  EXPECT_EQ(enc(BpeModel::from_json(model, false), "a??a"), (std::vector<int32_t>{1, 0, 1}));
}

TEST(Bpe, ByteLevelUsesAlphabetAndIgnoreMerges) {
  // bytes ' ' -> "Ġ", 'h' -> "h"; the merge makes "Ġh"
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab["\xC4\x80" + std::to_string(b)] = 1000 + b;  // filler, unused
  vocab["\xC4\xA0"] = 1;  // Ġ
  vocab["h"] = 2;
  vocab["i"] = 3;
  vocab["\xC4\xA0h"] = 4;
  vocab["hi"] = 5;
  vocab["\xC4\xA0hi"] = 6;
  json model = {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"\xC4\xA0 h", "h i"}}};
  const BpeModel m = BpeModel::from_json(model, true);
  EXPECT_EQ(enc(m, " hi"), (std::vector<int32_t>{4, 3}));  // " h" has the lower rank
  model["ignore_merges"] = true;
  EXPECT_EQ(enc(BpeModel::from_json(model, true), " hi"), (std::vector<int32_t>{6}));  // whole piece is a token
}

TEST(Bpe, RefusesWhatItCannotDo) {
  json model = {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", {"a b"}}};
  EXPECT_THROW(BpeModel::from_json(model, false), mmx::Error);  // 'b' not in vocab
  model = {{"type", "WordPiece"}, {"vocab", {{"a", 0}}}};
  EXPECT_THROW(BpeModel::from_json(model, false), mmx::Error);
  model = {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", json::array()}, {"continuing_subword_prefix", "##"}};
  EXPECT_THROW(BpeModel::from_json(model, false), mmx::Error);
}
