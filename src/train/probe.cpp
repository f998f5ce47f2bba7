#include "train/probe.h"

#include <cctype>
#include <map>
#include <random>

#include "base/error.h"

namespace mmx::train {

namespace {
constexpr int64_t kLead = 16;

std::string two_words(std::mt19937_64& rng, const std::vector<std::string>& words) {
  std::string s = words[rng() % words.size()];
  s += '_';
  s += words[rng() % words.size()];
  return s;
}

void append(std::vector<int32_t>& dst, const std::vector<int32_t>& src) { dst.insert(dst.end(), src.begin(), src.end()); }

void append_span(std::vector<int32_t>& dst, const std::vector<int32_t>& text, std::mt19937_64& rng, int64_t n) {
  const uint64_t start = rng() % uint64_t(int64_t(text.size()) - n + 1);
  dst.insert(dst.end(), text.begin() + int64_t(start), text.begin() + int64_t(start) + n);
}
}  // namespace

std::vector<std::string> retrieval_words(std::string_view text) {
  std::map<std::string, int64_t> count;
  for (size_t i = 0; i < text.size();) {
    const auto lower = [&](size_t k) { return k < text.size() && text[k] >= 'a' && text[k] <= 'z'; };
    const auto word = [&](size_t k) { return k < text.size() && (std::isalnum((unsigned char)text[k]) || text[k] == '_'); };
    if (!lower(i) || (i > 0 && word(i - 1))) { ++i; continue; }
    size_t j = i;
    while (lower(j)) ++j;
    if (!word(j) && j - i >= 3 && j - i <= 8) ++count[std::string(text.substr(i, j - i))];
    i = j;
  }
  std::vector<std::string> words;
  for (const auto& [w, n] : count)
    if (n >= 5) words.push_back(w);
  if (words.size() < 16)
    fail("retrieval probe: the held-out text has {} words of 3-8 letters seen 5 times; at least 16 are needed",
         words.size());
  return words;
}

RetrievalSample make_retrieval_sample(const tok::Tokenizer& tk, const std::vector<int32_t>& held_out,
                                      const std::vector<std::string>& words, int64_t distance,
                                      uint64_t seed, int64_t index, bool planted) {
  if (distance < 0 || int64_t(held_out.size()) < distance + kLead + 1)
    fail("retrieval probe: distance {} needs at least {} held-out tokens, the text has {}", distance,
         distance + kLead + 1, held_out.size());
  std::seed_seq ss{uint32_t(seed), uint32_t(seed >> 32), uint32_t(distance), uint32_t(index)};
  std::mt19937_64 rng(ss);
  RetrievalSample s;
  s.key = two_words(rng, words);
  s.value = two_words(rng, words);
  std::string shown = s.value;  // the control plants another value of the same shape
  while (!planted && shown == s.value) shown = two_words(rng, words);

  append_span(s.context, held_out, rng, kLead);
  append(s.context, tk.encode(s.key + " = \""));
  append(s.context, tk.encode(shown));
  append(s.context, tk.encode("\"\n"));
  s.plant_end = int64_t(s.context.size());
  append_span(s.context, held_out, rng, distance);
  s.query_begin = int64_t(s.context.size());
  append(s.context, tk.encode("\n" + s.key + " = \""));
  s.answer = tk.encode(s.value);
  return s;
}

}  // namespace mmx::train
