// Byte-level BPE trainer (see bpe_trainer.h).
//
// Reading order: input preparation (lossy UTF-8, special tokens cut out, chunked
// pre-tokenization, word counts) -> the merge loop (pair counts, pair -> words index, lazy
// max-heap) -> the tokenizer.json / tokenizer_config.json writers.
#include "tokenizer/bpe_trainer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "tokenizer/m2_tokens.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"

namespace mmx::tok {

using ojson = nlohmann::ordered_json;

namespace {

// ---- the written pre-tokenizer (also the one we split with) ----

ojson m2_pre_tokenizer_json() {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", kM2SplitRegex}}}, {"behavior", "Isolated"}, {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
}

const PreTokenizer& m2_pretokenizer() {
  static const PreTokenizer p = PreTokenizer::from_json(nlohmann::json::parse(m2_pre_tokenizer_json().dump()));
  return p;
}

// ---- input preparation ----

constexpr size_t kChunkBytes = size_t(1) << 20;  // pre-tokenization works on ~1 MB chunks

bool is_ascii_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// Calls fn(piece) for every pre-token of `text` (valid UTF-8, no special tokens), chunk by chunk,
// and on_chunk(bytes done) after each chunk. A chunk ends after a '\n' followed by an ASCII
// letter or digit: no alternative of the M2 pattern matches across such a point ('\n' only ends
// the punctuation and newline alternatives, and the letter / digit alternatives cannot start
// with '\n'), every character is matched by some alternative, and the only lookahead, (?!\S),
// peeks one character — so the pieces are those of the whole text (bpe_trainer_test checks it).
template <typename Fn, typename ChunkFn>
void for_each_piece(std::string_view text, Fn&& fn, ChunkFn&& on_chunk) {
  std::vector<Piece> pieces;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = std::min(text.size(), begin + kChunkBytes);
    while (end < text.size() && !(text[end - 1] == '\n' && is_ascii_alnum(text[end]))) ++end;
    const std::string_view chunk = text.substr(begin, end - begin);
    pieces.clear();
    m2_pretokenizer().split(chunk, pieces);
    for (const Piece& p : pieces) fn(chunk.substr(p.begin, p.end - p.begin));
    on_chunk(end);
    begin = end;
  }
}

// Cuts `text` at the special tokens (leftmost, then longest occurrence, as the encoder's added
// vocabulary does): calls seg(segment) for the text between them; returns how many were cut.
template <typename Fn>
int64_t for_each_segment(std::string_view text, const std::vector<std::string>& specials, Fn&& seg) {
  constexpr size_t npos = std::string_view::npos;
  std::vector<size_t> next(specials.size());  // next occurrence of each at or after `pos`
  for (size_t i = 0; i < specials.size(); ++i) next[i] = text.find(specials[i]);
  int64_t n_cut = 0;
  size_t pos = 0;
  for (;;) {
    size_t best_at = npos, best_len = 0;
    for (size_t i = 0; i < specials.size(); ++i) {
      if (next[i] != npos && next[i] < pos) next[i] = text.find(specials[i], pos);
      if (next[i] < best_at || (next[i] == best_at && next[i] != npos && specials[i].size() > best_len))
        best_at = next[i], best_len = specials[i].size();
    }
    if (best_at == npos) break;
    if (best_at > pos) seg(text.substr(pos, best_at - pos));
    ++n_cut;
    pos = best_at + best_len;
  }
  if (pos < text.size()) seg(text.substr(pos));
  return n_cut;
}

// ---- the merge loop ----

struct Word {
  std::vector<int32_t> syms;  // token ids, left to right
  int64_t count;              // occurrences of this piece in the text
};

inline uint64_t pair_key(int32_t a, int32_t b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }
inline int32_t pair_left(uint64_t k) { return int32_t(k >> 32); }
inline int32_t pair_right(uint64_t k) { return int32_t(k & 0xFFFFFFFFu); }

struct HeapEntry {
  int64_t count;
  uint64_t pair;
};

class Trainer {
 public:
  Trainer(std::vector<Word> words, int64_t min_frequency) : words_(std::move(words)), min_frequency_(min_frequency) {
    tokens_.reserve(4096);
    for (int b = 0; b < 256; ++b) add_token(std::string(1, char(b)));
    for (int32_t w = 0; w < int32_t(words_.size()); ++w) {
      const auto& s = words_[w].syms;
      for (size_t i = 0; i + 1 < s.size(); ++i) add_count(pair_key(s[i], s[i + 1]), words_[w].count, w);
    }
    for (const auto& [p, c] : counts_) push(p, c);
    touched_.clear();
  }

  // Learns one merge; false when no pair reaches min_frequency.
  bool step() {
    uint64_t best = 0;
    for (;;) {
      if (heap_.empty()) return false;
      std::pop_heap(heap_.begin(), heap_.end(), lower_priority());
      const HeapEntry e = heap_.back();
      heap_.pop_back();
      const auto it = counts_.find(e.pair);
      const int64_t now = it == counts_.end() ? 0 : it->second;
      if (now == e.count) {
        if (now < min_frequency_) return false;  // the best pair is too rare: so is every other
        best = e.pair;
        break;
      }
      push(e.pair, now);  // stale (counts only fall between pushes): re-queue with the true count
    }
    apply(pair_left(best), pair_right(best));
    return true;
  }

  int32_t n_tokens() const { return int32_t(tokens_.size()); }
  const std::vector<std::string>& tokens() const { return tokens_; }
  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merges_; }

 private:
  // Heap order: higher count first; on equal counts the lexicographically smaller pair first.
  struct LowerPriority {
    const std::vector<std::string>* tokens;
    bool operator()(const HeapEntry& x, const HeapEntry& y) const {
      if (x.count != y.count) return x.count < y.count;
      const int c = (*tokens)[pair_left(x.pair)].compare((*tokens)[pair_left(y.pair)]);
      if (c != 0) return c > 0;
      return (*tokens)[pair_right(x.pair)].compare((*tokens)[pair_right(y.pair)]) > 0;
    }
  };
  LowerPriority lower_priority() const { return {&tokens_}; }

  void push(uint64_t pair, int64_t count) {
    if (count < min_frequency_) return;  // if it rises later, apply() pushes it again
    heap_.push_back({count, pair});
    std::push_heap(heap_.begin(), heap_.end(), lower_priority());
  }

  int32_t add_token(std::string bytes) {
    const auto [it, inserted] = token_ids_.emplace(bytes, int32_t(tokens_.size()));
    if (inserted) tokens_.push_back(std::move(bytes));
    return it->second;
  }

  // counts_[pair] += delta for word w; a rise records w in the pair's word list and the pair in
  // touched_ (re-queued after the merge).
  void add_count(uint64_t pair, int64_t delta, int32_t w) {
    int64_t& c = counts_[pair];
    c += delta;
    MMX_CHECK(c >= 0, "negative count for pair ({}, {})", pair_left(pair), pair_right(pair));
    if (delta > 0) {
      auto& ws = where_[pair];
      if (ws.empty() || ws.back() != w) ws.push_back(w);
      touched_.push_back(pair);
    } else if (c == 0) {
      counts_.erase(pair);
    }
  }

  // Merges every occurrence of (a, b), left to right and non-overlapping in each word (HF's
  // Word::merge), updating the counts of the neighbouring pairs as it goes.
  void apply(int32_t a, int32_t b) {
    const int32_t id = add_token(tokens_[a] + tokens_[b]);
    merges_.emplace_back(a, b);
    const uint64_t ab = pair_key(a, b);
    std::vector<int32_t> ws = std::move(where_[ab]);
    where_.erase(ab);
    std::sort(ws.begin(), ws.end());
    ws.erase(std::unique(ws.begin(), ws.end()), ws.end());
    touched_.clear();
    for (int32_t w : ws) {
      std::vector<int32_t>& s = words_[w].syms;
      const int64_t c = words_[w].count;
      size_t o = 0;  // s[0..o) is the merged prefix
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          add_count(ab, -c, w);
          if (o > 0) {
            add_count(pair_key(s[o - 1], a), -c, w);
            add_count(pair_key(s[o - 1], id), c, w);
          }
          if (i + 2 < s.size()) {
            add_count(pair_key(b, s[i + 2]), -c, w);
            add_count(pair_key(id, s[i + 2]), c, w);
          }
          s[o++] = id;
          ++i;
        } else {
          s[o++] = s[i];
        }
      }
      s.resize(o);
    }
    MMX_CHECK(!counts_.count(ab), "pair ({}, {}) still counted after its merge", a, b);
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
    for (uint64_t p : touched_) {
      const auto it = counts_.find(p);
      if (it != counts_.end()) push(p, it->second);
    }
  }

  std::vector<Word> words_;
  int64_t min_frequency_;
  std::vector<std::string> tokens_;  // id -> bytes
  std::unordered_map<std::string, int32_t> token_ids_;
  std::vector<std::pair<int32_t, int32_t>> merges_;
  std::unordered_map<uint64_t, int64_t> counts_;               // pair -> occurrences (> 0)
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;  // pair -> words that may hold it
  std::vector<HeapEntry> heap_;                               // entries may be stale (too high)
  std::vector<uint64_t> touched_;
};

// ---- writers ----

std::string alphabet(std::string_view bytes) {
  const auto& cp = byte_to_codepoint();
  std::string s;
  for (char c : bytes) utf8_append(s, cp[uint8_t(c)]);
  return s;
}

}  // namespace

std::vector<std::string_view> bpe_pretokenize_m2(std::string_view text) {
  std::vector<std::string_view> out;
  for_each_piece(text, [&](std::string_view p) { out.push_back(p); }, [](size_t) {});
  return out;
}

TrainedTokenizer train_bpe(std::string_view raw_text, const BpeTrainOptions& o, const BpeProgressFn& progress) {
  // ---- options ----
  std::vector<std::string> specials = o.special_tokens;
  if (specials.empty()) specials.assign(kM2SpecialTokens.begin(), kM2SpecialTokens.end());
  for (size_t i = 0; i < specials.size(); ++i) {
    if (specials[i].empty()) fail("train_bpe: special token #{} is empty", i);
    if (!utf8_is_valid(specials[i])) fail("train_bpe: special token #{} is not valid UTF-8", i);
    for (size_t j = 0; j < i; ++j)
      if (specials[j] == specials[i]) fail("train_bpe: special token '{}' is listed twice", specials[i]);
  }
  const int n_special = int(specials.size());
  const int min_vocab = 256 + n_special + 1;
  if (o.vocab_size < min_vocab)
    fail("vocab size {} is too small: it must be at least {} (256 byte tokens + {} special tokens + 1 merge)",
         o.vocab_size, min_vocab, n_special);
  if (o.min_frequency < 1) fail("train_bpe: min_frequency must be >= 1 (got {})", o.min_frequency);
  auto special_id_slot = [&](const std::string& s, const char* what) {
    for (int i = 0; i < n_special; ++i)
      if (specials[i] == s) return i;
    fail("train_bpe: {} token '{}' is not one of the special tokens", what, s);
  };
  const int bos_slot = special_id_slot(o.bos_token, "bos"), eos_slot = special_id_slot(o.eos_token, "eos"),
            pad_slot = special_id_slot(o.pad_token, "pad");

  // ---- words ----
  std::string lossy;
  if (!utf8_is_valid(raw_text)) lossy = utf8_lossy(raw_text);
  const std::string_view text = lossy.empty() ? raw_text : std::string_view(lossy);
  TrainedTokenizer t;
  t.n_bytes = int64_t(text.size());
  std::unordered_map<std::string_view, int64_t> word_counts;
  t.n_specials_in_text = for_each_segment(text, specials, [&](std::string_view seg) {
    for_each_piece(
        seg,
        [&](std::string_view p) {
          ++word_counts[p];
          ++t.n_pieces;
        },
        [&](size_t end) {
          const int64_t done = int64_t(seg.data() + end - text.data());
          if (progress) progress({BpeTrainProgress::Stage::kPretokenize, done, t.n_bytes});
        });
  });
  if (progress) progress({BpeTrainProgress::Stage::kPretokenize, t.n_bytes, t.n_bytes});
  if (word_counts.empty()) fail("nothing to train on: the text is empty (or only special tokens)");
  t.n_unique_words = int64_t(word_counts.size());

  // Words in byte order, so everything below is independent of the hash map's order.
  std::vector<std::pair<std::string_view, int64_t>> sorted(word_counts.begin(), word_counts.end());
  word_counts = {};
  std::sort(sorted.begin(), sorted.end());
  std::vector<Word> words;
  words.reserve(sorted.size());
  for (const auto& [w, c] : sorted) {
    Word word{std::vector<int32_t>(w.size()), c};
    for (size_t i = 0; i < w.size(); ++i) word.syms[i] = uint8_t(w[i]);
    if (word.syms.size() > 1) words.push_back(std::move(word));  // one-byte pieces hold no pair
  }
  sorted = {};

  // ---- merges ----
  const int32_t n_model = o.vocab_size - n_special;  // ids of the BPE model: bytes + merges
  Trainer tr(std::move(words), o.min_frequency);
  const int64_t total_new = n_model - 256;
  int64_t last_report = -1;
  while (tr.n_tokens() < n_model) {
    if (!tr.step()) {
      t.stopped_early = true;
      break;
    }
    const int64_t done = tr.n_tokens() - 256;
    if (progress && done / 64 != last_report) {
      last_report = done / 64;
      progress({BpeTrainProgress::Stage::kMerge, done, total_new});
    }
  }
  if (progress) progress({BpeTrainProgress::Stage::kMerge, tr.n_tokens() - 256, total_new});

  // ---- tokenizer.json ----
  const std::vector<std::string>& toks = tr.tokens();
  ojson vocab = ojson::object();
  for (size_t id = 0; id < toks.size(); ++id) vocab[alphabet(toks[id])] = id;
  ojson merges = ojson::array();
  for (const auto& [a, b] : tr.merges()) {
    merges.push_back(alphabet(toks[a]) + " " + alphabet(toks[b]));
    t.merges.emplace_back(toks[a], toks[b]);
  }
  ojson added = ojson::array();
  for (int s = 0; s < n_special; ++s) {
    const int32_t id = tr.n_tokens() + s;
    MMX_CHECK(!vocab.contains(specials[s]), "special token '{}' collides with a learned token", specials[s]);
    vocab[specials[s]] = id;
    added.push_back({{"id", id}, {"content", specials[s]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  t.vocab_size = tr.n_tokens() + n_special;
  t.bos_id = tr.n_tokens() + bos_slot;
  t.eos_id = tr.n_tokens() + eos_slot;
  t.pad_id = tr.n_tokens() + pad_slot;

  const ojson tj = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", m2_pre_tokenizer_json()},
      {"post_processor",
       {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
        {"ignore_merges", false}, {"vocab", vocab}, {"merges", merges}}},
  };
  t.tokenizer_json = tj.dump(1, ' ', /*ensure_ascii=*/false) + "\n";

  // ---- tokenizer_config.json ----
  ojson tc = {{"add_bos_token", false},
              {"add_eos_token", false},
              {"bos_token", o.bos_token},
              {"eos_token", o.eos_token},
              {"pad_token", o.pad_token},
              {"model_max_length", o.model_max_length},
              {"tokenizer_class", "GPT2Tokenizer"},
              {"clean_up_tokenization_spaces", false}};
  if (!o.chat_template.empty()) tc["chat_template"] = o.chat_template;
  t.tokenizer_config_json = tc.dump(2, ' ', false) + "\n";
  return t;
}

}  // namespace mmx::tok
