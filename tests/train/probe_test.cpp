// The retrieval probes' inputs (src/train/retrieval_task.h, src/train/probe.h): the synthetic task's
// sequences have exactly the structure their header states, and the text probe's samples plant the
// value the query asks for (the control plants another), at the stated distance.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "base/error.h"
#include "testing/tiny_models.h"
#include "tokenizer/tokenizer.h"
#include "train/probe.h"
#include "train/retrieval_task.h"

namespace mmx::train {
namespace {

TEST(RetrievalTask, SequencesHaveTheStatedStructure) {
  for (auto [len, pairs, filler] : {std::tuple{4, 1, 0}, {64, 8, 0}, {64, 8, 32}, {128, 8, 17}, {300, 16, 200}}) {
    SCOPED_TRACE(::testing::Message() << "len=" << len << " pairs=" << pairs << " filler=" << filler);
    std::vector<int32_t> tok(static_cast<size_t>(len)), tgt(static_cast<size_t>(len));
    retrieval_sequence(3, 7, len, pairs, filler, tok.data(), tgt.data());
    const int64_t lead = len - 4 * pairs - filler, q0 = lead + 2 * pairs + filler;
    for (int64_t i = 0; i < lead; ++i) EXPECT_LT(tok[size_t(i)], 256) << i;
    std::map<int32_t, std::pair<int32_t, int64_t>> planted;  // key -> (value, position)
    for (int64_t p = 0; p < pairs; ++p) {
      const int32_t k = tok[size_t(lead + 2 * p)], v = tok[size_t(lead + 2 * p + 1)];
      ASSERT_TRUE(k >= 256 && k < 512 && v >= 512 && v < 768) << p;
      EXPECT_TRUE(planted.emplace(k, std::pair{v, lead + 2 * p}).second) << "key " << k << " planted twice";
    }
    for (int64_t i = lead + 2 * pairs; i < q0; ++i) EXPECT_LT(tok[size_t(i)], 256) << i;
    std::set<int32_t> asked;
    int64_t scored = 0;
    for (int64_t i = 0; i < len; ++i) {
      if (tgt[size_t(i)] < 0) continue;
      ++scored;
      ASSERT_GE(i, q0);
      ASSERT_EQ((i - q0) % 2, 0) << "targets sit on the query keys";
      const auto it = planted.find(tok[size_t(i)]);
      ASSERT_NE(it, planted.end()) << "query of a key never planted";
      EXPECT_EQ(tgt[size_t(i)], it->second.first);
      EXPECT_EQ(tok[size_t(i + 1)], it->second.first) << "the answer is the next input";
      EXPECT_GE(i - it->second.second, filler + 2) << "a lookup at least filler + 2 back";
      asked.insert(tok[size_t(i)]);
    }
    EXPECT_EQ(scored, pairs);
    EXPECT_EQ(int64_t(asked.size()), pairs) << "every key asked once";
    std::vector<int32_t> tok2(tok.size()), tgt2(tgt.size());
    retrieval_sequence(3, 7, len, pairs, filler, tok2.data(), tgt2.data());
    EXPECT_EQ(tok, tok2);
    retrieval_sequence(3, 8, len, pairs, filler, tok2.data(), tgt2.data());
    EXPECT_NE(tok, tok2) << "another index, another sequence";
  }
  std::vector<int32_t> a(64), b(64);
  EXPECT_THROW(retrieval_sequence(1, 0, 64, 16, 1, a.data(), b.data()), Error);  // 4·16 + 1 > 64
  EXPECT_THROW(retrieval_sequence(1, 0, 64, 0, 0, a.data(), b.data()), Error);
}

TEST(RetrievalTask, HeldOutRowsAreNotTrainingRows) {
  std::vector<int32_t> tr, tg, ev, eg;
  retrieval_rows(1, 0, 0, 4, 128, 8, false, tr, tg);
  retrieval_rows(1, 0, 0, 4, 128, 8, true, ev, eg);
  ASSERT_EQ(tr.size(), size_t(4 * 128));
  EXPECT_NE(tr, ev);
  std::vector<int32_t> tr2, tg2;
  retrieval_rows(1, 0, 2, 2, 128, 8, false, tr2, tg2);  // rows 2..3 alone == rows 2..3 of the four
  EXPECT_TRUE(std::equal(tr2.begin(), tr2.end(), tr.begin() + 2 * 128));
}

TEST(TextProbe, PlantsTheAskedValueAtTheStatedDistance) {
  const tok::Tokenizer tk = tok::Tokenizer::from_path(testing::tiny_dir("minimax_m2", "f32", 1));
  std::string text;
  const char* names[] = {"alpha", "beta", "gamma", "delta", "socket", "buffer", "value", "config",
                         "parse", "reader", "writer", "token", "stream", "index", "cache", "field"};
  for (int i = 0; i < 200; ++i)
    text += std::string("def ") + names[i % 16] + "(" + names[(i * 7) % 16] + "):\n    return " + names[(i * 5) % 16] + "\n";
  const std::vector<int32_t> held = tk.encode(text, false);
  const std::vector<std::string> words = retrieval_words(text);
  EXPECT_TRUE(std::find(words.begin(), words.end(), "config") != words.end());
  EXPECT_TRUE(std::find(words.begin(), words.end(), "def") != words.end());
  for (int64_t d : {0, 5, 40}) {
    const RetrievalSample s = make_retrieval_sample(tk, held, words, d, 1, 3, true);
    const RetrievalSample c = make_retrieval_sample(tk, held, words, d, 1, 3, false);
    EXPECT_EQ(s.query_begin - s.plant_end, d);
    EXPECT_EQ(s.answer, tk.encode(s.value));
    EXPECT_EQ(s.key, c.key);
    EXPECT_EQ(s.answer, c.answer) << "the control asks for the same value";
    const auto has = [](const std::vector<int32_t>& hay, const std::vector<int32_t>& needle) {
      return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
    };
    EXPECT_TRUE(has(s.context, s.answer)) << "planted";
    const std::vector<int32_t> plant(c.context.begin() + 16, c.context.begin() + c.plant_end);
    EXPECT_FALSE(has(plant, c.answer)) << "the control's plant holds another value";
    EXPECT_EQ(std::vector<int32_t>(s.context.begin() + s.query_begin, s.context.end()),
              tk.encode("\n" + s.key + " = \""));
  }
  EXPECT_THROW(make_retrieval_sample(tk, held, words, int64_t(held.size()), 1, 0, true), Error);
  EXPECT_THROW(retrieval_words("too few words here"), Error);
}

}  // namespace
}  // namespace mmx::train
