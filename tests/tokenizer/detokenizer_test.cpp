// Incremental detokenizer: holds back partial code points, equals decode() when concatenated.
#include <gtest/gtest.h>

#include "tiny_json.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

using namespace mmx::tok;
using Ids = std::vector<int32_t>;

namespace {
const Tokenizer& tiny() {
  static const Tokenizer t = Tokenizer::from_json(test_data::tiny_tokenizer_json());
  return t;
}
std::string stream(const Ids& ids, bool skip, std::vector<std::string>* deltas = nullptr) {
  Detokenizer d(tiny(), skip);
  std::string all;
  for (int32_t id : ids) {
    std::string s = d.push(id);
    if (deltas) deltas->push_back(s);
    all += s;
  }
  all += d.flush();
  return all;
}
}  // namespace

TEST(Detokenizer, HoldsBackPartialCodePoints) {
  const Ids ids = {'a', 0xF0, 0x9F, 0x98, 0x80, 'b'};  // a 😀 b, one byte per id
  std::vector<std::string> deltas;
  EXPECT_EQ(stream(ids, false, &deltas), "a\xF0\x9F\x98\x80" "b");
  EXPECT_EQ(deltas, (std::vector<std::string>{"a", "", "", "", "\xF0\x9F\x98\x80", "b"}));
}

TEST(Detokenizer, MatchesDecodeIncludingInvalidAndSpecials) {
  const std::vector<Ids> cases = {
      tiny().encode("<s> the caf\u00e9 \xE6\x97\xA5\xE6\x9C\xAC</s>"),
      {0xE2, 0x82, 'x'},         // truncated sequence then ASCII
      {0xE2, 0x82},              // truncated at the end: flush -> U+FFFD
      {0xF0, 261, 0x9F},         // special token between bytes
      {0xED, 0xA0, 0x80},        // surrogate bytes
  };
  for (const Ids& ids : cases)
    for (bool skip : {false, true}) EXPECT_EQ(stream(ids, skip), tiny().decode(ids, skip));
}
