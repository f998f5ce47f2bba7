// BPE trainer (src/tokenizer/bpe_trainer.h): hand-derived merges, the fast trainer against a
// naive one (full recount per merge) on random texts, chunked == whole-text pre-tokenization,
// the trained file loading in our Tokenizer (round trips, special tokens at the last ids),
// determinism and the refusals. HF's ids on the same files are bpe_parity.js's job.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "base/error.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/m2_tokens.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

using namespace mmx::tok;
using Ids = std::vector<int32_t>;
using Merges = std::vector<std::pair<std::string, std::string>>;

namespace {

constexpr int kSpecials = int(kM2SpecialTokens.size());

BpeTrainOptions opts(int n_merges, int64_t min_frequency = 2) {
  BpeTrainOptions o;
  o.vocab_size = 256 + n_merges + kSpecials;
  o.min_frequency = min_frequency;
  return o;
}

// ---- the naive reference: recount every pair before every merge ----
// Words come from PreTokenizer on the whole text (built from the written pre_tokenizer JSON, not
// from the trainer's chunking), symbols are byte strings, counts live in an ordered map, so the
// first maximum is the lexicographically smallest pair.
Merges naive_merges(const std::string& text, const std::string& tokenizer_json, int n_new_ids, int64_t min_frequency) {
  const PreTokenizer pre = PreTokenizer::from_json(nlohmann::json::parse(tokenizer_json).at("pre_tokenizer"));
  std::vector<Piece> pieces;
  pre.split(text, pieces);
  std::map<std::string, int64_t> word_counts;
  for (const Piece& p : pieces) ++word_counts[text.substr(p.begin, p.end - p.begin)];
  std::vector<std::pair<std::vector<std::string>, int64_t>> words;
  for (const auto& [w, c] : word_counts) {
    std::vector<std::string> syms;
    for (char ch : w) syms.emplace_back(1, ch);
    words.emplace_back(syms, c);
  }
  std::set<std::string> vocab;
  for (int b = 0; b < 256; ++b) vocab.insert(std::string(1, char(b)));
  Merges merges;
  int new_ids = 0;
  while (new_ids < n_new_ids) {
    std::map<std::pair<std::string, std::string>, int64_t> counts;
    for (const auto& [s, c] : words)
      for (size_t i = 0; i + 1 < s.size(); ++i) counts[{s[i], s[i + 1]}] += c;
    std::pair<std::string, std::string> best;
    int64_t best_n = 0;
    for (const auto& [p, n] : counts)
      if (n > best_n) best = p, best_n = n;
    if (best_n < min_frequency || best_n == 0) break;
    merges.push_back(best);
    const std::string merged = best.first + best.second;
    if (vocab.insert(merged).second) ++new_ids;
    for (auto& [s, c] : words) {
      std::vector<std::string> out;
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == best.first && s[i + 1] == best.second) {
          out.push_back(merged);
          ++i;
        } else {
          out.push_back(s[i]);
        }
      }
      s = out;
    }
  }
  return merges;
}

std::string alphabet(std::string_view bytes) {
  std::string s;
  for (char c : bytes) utf8_append(s, byte_to_codepoint()[uint8_t(c)]);
  return s;
}

// Python-like text with the patterns the M2 regex treats specially.
std::string code_like_text(size_t n_bytes, uint32_t seed) {
  static const char* kParts[] = {"def ", "self", ".", "(", ")", ":\n", "    ", "        ", "return ", "x", "_y",
                                 " = ", "1", "23", "4567", "\n", "\n\n", "\r\n", "# ", "Привет", "Мир", "日本",
                                 "'s", "'LL", "\"\"\"", "/", "//", "\t", "  \n", "CamelCase", "HTTPServer", "é",
                                 "😀", "\xC2\xA0", "[e", " ~", "!"};
  std::mt19937 rng(seed);
  std::string s;
  while (s.size() < n_bytes) s += kParts[rng() % std::size(kParts)];
  return s;
}

}  // namespace

// ---- known answers ----

TEST(BpeTrainer, HandDerivedMergesAndTieBreak) {
  // Pieces "abab", " abab", " ab", " cd" x2. Counts: (a,b) 5 -> "ab". Then (ab,ab) 1,
  // (" ",ab) 2, (" ",c) 2, (c,d) 2: a tie at 2, won by the smallest pair (" ", "ab") — an id
  // order would pick (" ", "c") (99 < 256). Then (" ", c), then (" c", d); every other pair is
  // seen once, below min_frequency 2.
  const std::string text = "abab abab ab cd cd";
  const TrainedTokenizer t = train_bpe(text, opts(10));
  EXPECT_EQ(t.merges, (Merges{{"a", "b"}, {" ", "ab"}, {" ", "c"}, {" c", "d"}}));
  EXPECT_TRUE(t.stopped_early);
  EXPECT_EQ(t.vocab_size, 256 + 4 + kSpecials);
  EXPECT_EQ(t.n_pieces, 5);
  EXPECT_EQ(t.n_unique_words, 4);

  const Tokenizer tok = Tokenizer::from_json_text(t.tokenizer_json);
  EXPECT_EQ(tok.encode(text), (Ids{256, 256, 257, 256, 257, 259, 259}));
  EXPECT_EQ(tok.id_to_token(257), alphabet(" ab"));
  EXPECT_EQ(tok.vocab_size(), t.vocab_size);

  // min_frequency 1 goes on: (" ab", ab) beats (ab, ab) (' ' < 'a'), then (ab, ab); then no pairs.
  const TrainedTokenizer t1 = train_bpe(text, opts(10, 1));
  EXPECT_EQ(t1.merges, (Merges{{"a", "b"}, {" ", "ab"}, {" ", "c"}, {" c", "d"}, {" ab", "ab"}, {"ab", "ab"}}));
  EXPECT_EQ(Tokenizer::from_json_text(t1.tokenizer_json).encode(text), (Ids{261, 260, 257, 259, 259}));

  // A vocabulary that is full first stops there.
  EXPECT_EQ(train_bpe(text, opts(2)).merges, (Merges{{"a", "b"}, {" ", "ab"}}));
  EXPECT_FALSE(train_bpe(text, opts(2)).stopped_early);
}

TEST(BpeTrainer, OverlappingPairsAreCountedAndMergedLeftToRight) {
  // "aaa" x1, " aaa" x2: (a,a) is counted twice per word = 6. After it the words are [aa,a] and
  // [" ",aa,a]: (aa,a) 3 > (" ",aa) 2; then (" ", aaa) 2.
  EXPECT_EQ(train_bpe("aaa aaa aaa", opts(10)).merges, (Merges{{"a", "a"}, {"aa", "a"}, {" ", "aaa"}}));
  // "aaaa" -> [aa,aa] (not [aa,a,a] and a second (a,a) from the overlap).
  EXPECT_EQ(train_bpe("aaaa aaaa", opts(10)).merges, (Merges{{"a", "a"}, {"aa", "aa"}}));
}

TEST(BpeTrainer, MergeIdsFollowTheLearnedOrder) {
  const std::string text = code_like_text(50000, 1);
  const TrainedTokenizer t = train_bpe(text, opts(300));
  const Tokenizer tok = Tokenizer::from_json_text(t.tokenizer_json);
  ASSERT_EQ(t.merges.size(), 300u);  // this text makes no token twice (checked by the id below)
  for (size_t r = 0; r < t.merges.size(); ++r) {
    const auto& [a, b] = t.merges[r];
    EXPECT_EQ(tok.token_to_id(alphabet(a + b)), int32_t(256 + r)) << "merge " << r;
  }
  for (int b = 0; b < 256; ++b) EXPECT_EQ(tok.token_to_id(alphabet(std::string(1, char(b)))), b);
}

// ---- against the naive trainer ----

TEST(BpeTrainer, EqualsTheNaiveTrainerOnRandomTexts) {
  int n_checked = 0, n_repeated_tokens = 0;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    std::mt19937 rng(seed);
    // a tiny alphabet makes many ties, long runs and tokens that can be built in two ways
    static const char* kAtoms[] = {"a", "b", "ab", "ba", " ", "  ", "\n", "1", "é", "!", "aa"};
    const size_t n_atoms = 2 + rng() % (std::size(kAtoms) - 1);
    std::string text;
    const size_t len = 20 + rng() % 3000;
    while (text.size() < len) text += kAtoms[rng() % n_atoms];
    const int n_merges = 5 + int(rng() % 200);
    const int64_t min_frequency = 1 + int64_t(rng() % 3);
    SCOPED_TRACE("seed " + std::to_string(seed));
    const TrainedTokenizer t = train_bpe(text, opts(n_merges, min_frequency));
    const Merges want = naive_merges(text, t.tokenizer_json, n_merges, min_frequency);
    ASSERT_EQ(t.merges, want);
    n_repeated_tokens += int(t.merges.size()) - (t.vocab_size - 256 - kSpecials);
    ++n_checked;
    // the file is what the merges say
    const Tokenizer tok = Tokenizer::from_json_text(t.tokenizer_json);
    EXPECT_EQ(tok.decode(tok.encode(text)), text);
  }
  EXPECT_EQ(n_checked, 40);
  std::printf("[          ] merges that produced an existing token: %d\n", n_repeated_tokens);
}

// ---- pre-tokenization ----

TEST(BpeTrainer, ChunkedPretokenizationEqualsWholeText) {
  const std::string text = code_like_text(3u << 20, 7);  // > 1 MB chunks
  const TrainedTokenizer t = train_bpe("x x", opts(1, 1));
  const PreTokenizer pre = PreTokenizer::from_json(nlohmann::json::parse(t.tokenizer_json).at("pre_tokenizer"));
  std::vector<Piece> whole;
  pre.split(text, whole);
  const std::vector<std::string_view> chunked = bpe_pretokenize_m2(text);
  ASSERT_EQ(chunked.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    ASSERT_EQ(chunked[i].data() - text.data(), int64_t(whole[i].begin)) << "piece " << i;
    ASSERT_EQ(chunked[i].size(), whole[i].end - whole[i].begin) << "piece " << i;
  }
}

TEST(BpeTrainer, SpecialTokensAreCutOutOfTheTrainingText) {
  // "<think>" appears 3 times: without the cut, ("<", "t") etc. would be merged.
  const TrainedTokenizer t = train_bpe("<think>xy<think>xy<think>", opts(5));
  EXPECT_EQ(t.n_specials_in_text, 3);
  EXPECT_EQ(t.merges, (Merges{{"x", "y"}}));
  EXPECT_EQ(t.n_pieces, 2);
}

// ---- the trained file in our Tokenizer ----

TEST(BpeTrainer, TrainedTokenizerRoundTripsAndHasSpecialsAtTheLastIds) {
  const std::string text = code_like_text(200000, 3);
  BpeTrainOptions o = opts(700);
  o.chat_template = "{{ messages }}";
  const TrainedTokenizer t = train_bpe(text, o);
  ASSERT_EQ(t.vocab_size, o.vocab_size);
  const Tokenizer tok = Tokenizer::from_json_text(t.tokenizer_json);
  EXPECT_EQ(tok.vocab_size(), o.vocab_size);
  for (int s = 0; s < kSpecials; ++s) {
    const int32_t id = o.vocab_size - kSpecials + s;
    EXPECT_EQ(tok.token_to_id(kM2SpecialTokens[s]), id);
    EXPECT_TRUE(tok.is_special(id));
  }
  EXPECT_EQ(t.bos_id, tok.token_to_id(kM2BosToken));
  EXPECT_EQ(t.eos_id, tok.token_to_id(kM2EosToken));
  EXPECT_EQ(t.pad_id, tok.token_to_id(kM2PadToken));
  const Ids chat = tok.encode("]~!b[]~b]user\nhi[e~[");
  ASSERT_GE(chat.size(), 4u);
  EXPECT_EQ(chat[0], t.bos_id);
  EXPECT_EQ(chat[1], tok.token_to_id("]~b]"));
  EXPECT_EQ(chat.back(), t.eos_id);
  EXPECT_EQ(tok.decode(chat, /*skip_special_tokens=*/true), "user\nhi");

  // round trips: the training text, other text, every byte value, random bytes
  EXPECT_EQ(tok.decode(tok.encode(text)), text);
  const std::string other = code_like_text(20000, 99);
  EXPECT_EQ(tok.decode(tok.encode(other)), other);
  for (int b = 0; b < 128; ++b) EXPECT_EQ(tok.encode(std::string(1, char(b))), (Ids{b})) << b;
  std::mt19937 rng(5);
  for (int r = 0; r < 200; ++r) {
    std::string s(rng() % 64, '\0');
    for (char& c : s) c = char(rng() % 256);
    EXPECT_EQ(tok.decode(tok.encode(s)), utf8_lossy(s));  // lossy for invalid UTF-8, as HF
  }

  const nlohmann::json tc = nlohmann::json::parse(t.tokenizer_config_json);
  EXPECT_EQ(tc.at("bos_token"), kM2BosToken);
  EXPECT_EQ(tc.at("eos_token"), kM2EosToken);
  EXPECT_EQ(tc.at("chat_template"), "{{ messages }}");
  const nlohmann::json tj = nlohmann::json::parse(t.tokenizer_json);
  EXPECT_EQ(tj.at("model").at("type"), "BPE");
  EXPECT_EQ(tj.at("decoder").at("type"), "ByteLevel");
  EXPECT_EQ(tj.at("pre_tokenizer").at("pretokenizers")[0].at("pattern").at("Regex"), kM2SplitRegex);
  EXPECT_EQ(tj.at("added_tokens").size(), size_t(kSpecials));
}

TEST(BpeTrainer, InvalidUtf8IsTrainedAsReplacementCharacters) {
  const TrainedTokenizer t = train_bpe("\xff\xff\xff\xff ok \xfe", opts(3));
  EXPECT_EQ(t.n_bytes, int64_t(std::string("\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD ok \xEF\xBF\xBD").size()));
  // EF BF and BF BD are both seen 5 times: the smaller left byte (0xBF) wins
  EXPECT_EQ(t.merges.front(), (std::pair<std::string, std::string>{"\xBF", "\xBD"}));
  Tokenizer::from_json_text(t.tokenizer_json);  // loads
}

TEST(BpeTrainer, Deterministic) {
  const std::string text = code_like_text(300000, 11);
  const TrainedTokenizer a = train_bpe(text, opts(500)), b = train_bpe(text, opts(500));
  EXPECT_EQ(a.tokenizer_json, b.tokenizer_json);
  EXPECT_EQ(a.tokenizer_config_json, b.tokenizer_config_json);
}

TEST(BpeTrainer, ReportsProgress) {
  int64_t last_merge = -1, calls = 0;
  bool pretok_done = false;
  const TrainedTokenizer t = train_bpe(code_like_text(100000, 2), opts(400), [&](const BpeTrainProgress& p) {
    ++calls;
    if (p.stage == BpeTrainProgress::Stage::kPretokenize) {
      pretok_done = pretok_done || p.done == p.total;
    } else {
      EXPECT_TRUE(pretok_done);
      EXPECT_GE(p.done, last_merge);
      last_merge = p.done;
    }
  });
  EXPECT_EQ(last_merge, 400);
  EXPECT_GT(calls, 3);
}

// ---- refusals ----

TEST(BpeTrainer, Refusals) {
  auto throws = [](const std::string& text, const BpeTrainOptions& o, const std::string& what) {
    try {
      train_bpe(text, o);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const mmx::Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  BpeTrainOptions o = opts(0);  // 256 + specials: one short
  throws("abc", o, "too small");
  o.vocab_size = 100;
  throws("abc", o, "at least 265");
  EXPECT_NO_THROW(train_bpe("abc", opts(1)));
  throws("", opts(5), "nothing to train on");
  throws("]~!b[[e~[", opts(5), "nothing to train on");
  o = opts(5);
  o.min_frequency = 0;
  throws("abc", o, "min_frequency");
  o = opts(5);
  o.bos_token = "<s>";
  throws("abc", o, "bos token '<s>'");
  o = opts(5);
  o.special_tokens = {"]!p~[", "]~!b[", "[e~[", "]~!b["};
  throws("abc", o, "listed twice");
  o.special_tokens = {"]!p~[", "]~!b[", "[e~[", ""};
  throws("abc", o, "empty");
  // a custom special set: the last ids, bos/eos/pad found in it
  o.special_tokens = {"[e~[", "]~!b[", "]!p~["};
  o.vocab_size = 256 + 2 + 3;
  const TrainedTokenizer t = train_bpe("ab ab ab", o);
  EXPECT_EQ(t.eos_id, 258);
  EXPECT_EQ(t.bos_id, 259);
  EXPECT_EQ(t.pad_id, 260);
}
