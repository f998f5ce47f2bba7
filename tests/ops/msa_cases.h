// The MSA attention test grid shared by msa_test (F32 pages) and msa_bf16_test (BF16 pages).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <random>
#include <vector>

namespace mmx::testing {

struct MsaAttnCase {
  int64_t B, K, T, n_heads, n_kvh, d, n_q;
  bool decode;
};

// Every (B, K, T) with a rotating set of (heads, head_dim, n_q, decode): GQA groups 1..6, head
// dims with vector tails, single and multi-query; f(case, seed) with seeds seed0 + 7, + 14, ...
inline void for_each_msa_grid_case(uint64_t seed0, const std::function<void(const MsaAttnCase&, uint64_t)>& f) {
  struct Shape {
    int64_t n_heads, n_kvh, d, n_q;
    bool decode;
  };
  const Shape shapes[] = {{1, 1, 8, 1, true},   {4, 1, 13, 5, false}, {6, 2, 32, 5, true},
                          {8, 4, 8, 1, false},  {12, 2, 13, 5, true}, {6, 2, 32, 3, false},
                          {4, 4, 32, 4, true}};
  uint64_t seed = seed0;
  size_t n = 0;
  for (int64_t B : {4, 16, 128})
    for (int64_t K : {1, 2, 3, 16}) {
      const int64_t kb = K * B;
      for (int64_t T : {int64_t(1), B + 1, kb, kb + B + 3, std::min<int64_t>(3 * kb + 5, 2500)})
        for (int rep = 0; rep < 2; ++rep) {
          const Shape& h = shapes[n++ % std::size(shapes)];
          f({B, K, T, h.n_heads, h.n_kvh, h.d, h.n_q, h.decode}, seed += 7);
        }
    }
}

// Query positions: the last n_q of T (decode / chunked prefill) or random ones in [0, T).
inline std::vector<int32_t> make_positions(int64_t T, int64_t n_q, bool decode, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> p(static_cast<size_t>(n_q));
  for (int64_t i = 0; i < n_q; ++i)
    p[size_t(i)] = decode ? int32_t(std::max<int64_t>(T - n_q + i, 0))
                          : int32_t(std::uniform_int_distribution<int64_t>(0, T - 1)(rng));
  return p;
}

}  // namespace mmx::testing
