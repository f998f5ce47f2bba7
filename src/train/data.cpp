#include "train/data.h"

#include <cctype>
#include <cstdio>

#include "base/error.h"

namespace mmx::train {

namespace {

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void copy_window(const std::vector<int32_t>& ids, int64_t start, int64_t seq_len, int32_t* tok, int32_t* tgt) {
  for (int64_t i = 0; i < seq_len; ++i) {
    tok[i] = ids[size_t(start + i)];
    tgt[i] = ids[size_t(start + i + 1)];
  }
}

}  // namespace

void TokenData::sample_windows(uint64_t seed, int64_t step, int64_t row0, int64_t n, int64_t seq_len,
                               std::vector<int32_t>& tokens, std::vector<int32_t>& targets) const {
  MMX_CHECK(size() >= seq_len + 1, "{} ids for windows of {}", size(), seq_len + 1);
  tokens.resize(size_t(n * seq_len));
  targets.resize(size_t(n * seq_len));
  const uint64_t span = uint64_t(size() - seq_len);  // window starts 0 .. size - seq_len - 1
  for (int64_t r = 0; r < n; ++r) {
    const uint64_t h = mix64(mix64(mix64(seed) ^ uint64_t(step)) ^ uint64_t(row0 + r));
    copy_window(ids, int64_t(h % span), seq_len, tokens.data() + r * seq_len, targets.data() + r * seq_len);
  }
}

void TokenData::windows_in_order(int64_t w0, int64_t n, int64_t seq_len, std::vector<int32_t>& tokens,
                                 std::vector<int32_t>& targets) const {
  MMX_CHECK((w0 + n) * seq_len + 1 <= size(), "window {} past the end", w0 + n);
  tokens.resize(size_t(n * seq_len));
  targets.resize(size_t(n * seq_len));
  for (int64_t r = 0; r < n; ++r)
    copy_window(ids, (w0 + r) * seq_len, seq_len, tokens.data() + r * seq_len, targets.data() + r * seq_len);
}

TokenData tokenize_corpus(const tok::Tokenizer& tk, std::string_view text, const char* what) {
  // Cut points: after a '\n' followed by an ASCII letter or digit, about every 256 KiB.
  std::vector<size_t> cuts{0};
  constexpr size_t kChunk = 256 << 10;
  for (size_t pos = kChunk; pos < text.size();) {
    size_t i = text.find('\n', pos);
    while (i != std::string_view::npos && i + 1 < text.size() && !std::isalnum(uint8_t(text[i + 1])))
      i = text.find('\n', i + 1);
    if (i == std::string_view::npos || i + 1 >= text.size()) break;
    cuts.push_back(i + 1);
    pos = i + 1 + kChunk;
  }
  cuts.push_back(text.size());
  const int64_t n_chunks = int64_t(cuts.size()) - 1;
  std::vector<std::vector<int32_t>> parts(static_cast<size_t>(n_chunks));
  int64_t done = 0;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t c = 0; c < n_chunks; ++c) {
    parts[size_t(c)] = tk.encode(text.substr(cuts[size_t(c)], cuts[size_t(c + 1)] - cuts[size_t(c)]), false);
#pragma omp critical
    {
      ++done;
      if (what) std::fprintf(stderr, "\rtokenizing %s: %lld/%lld chunks", what, (long long)done, (long long)n_chunks);
    }
  }
  TokenData d;
  for (auto& p : parts) d.ids.insert(d.ids.end(), p.begin(), p.end());
  if (what) std::fprintf(stderr, " -> %lld tokens (%.2f bytes/token)\n", (long long)d.size(),
                         double(text.size()) / double(std::max<int64_t>(1, d.size())));
  return d;
}

}  // namespace mmx::train
