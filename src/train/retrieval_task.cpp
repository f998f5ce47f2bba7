#include "train/retrieval_task.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "base/error.h"

namespace mmx::train {

void retrieval_sequence(uint64_t seed, uint64_t index, int64_t len, int64_t pairs, int64_t filler,
                        int32_t* tokens, int32_t* targets) {
  if (pairs < 1 || pairs > kRetrievalMaxPairs || filler < 0 || 4 * pairs + filler > len)
    fail("retrieval task: {} pairs and {} filler ids do not fit a sequence of {} (need 1 <= pairs <= {} and "
         "4 * pairs + filler <= length)", pairs, filler, len, kRetrievalMaxPairs);
  std::seed_seq ss{uint32_t(seed), uint32_t(seed >> 32), uint32_t(index), uint32_t(index >> 32)};
  std::mt19937_64 rng(ss);
  std::vector<int32_t> keys(256);
  std::iota(keys.begin(), keys.end(), 256);
  std::shuffle(keys.begin(), keys.end(), rng);  // the first `pairs` are this sequence's keys
  std::vector<int32_t> values(static_cast<size_t>(pairs), 0);
  for (int32_t& v : values) v = 512 + int32_t(rng() % 256);
  std::vector<int64_t> order(static_cast<size_t>(pairs));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);

  std::fill(targets, targets + len, -1);
  int64_t i = 0;
  const auto noise = [&](int64_t n) {
    for (int64_t e = i + n; i < e; ++i) tokens[i] = int32_t(rng() % 256);
  };
  noise(len - 4 * pairs - filler);
  for (int64_t p = 0; p < pairs; ++p) tokens[i++] = keys[size_t(p)], tokens[i++] = values[size_t(p)];
  noise(filler);
  for (const int64_t p : order) {
    targets[i] = values[size_t(p)];
    tokens[i++] = keys[size_t(p)];
    tokens[i++] = values[size_t(p)];
  }
}

void retrieval_rows(uint64_t seed, int64_t step, int64_t row0, int64_t n, int64_t len, int64_t pairs, bool eval,
                    std::vector<int32_t>& tokens, std::vector<int32_t>& targets) {
  if (4 * pairs > len) fail("retrieval task: {} pairs need sequences of at least {} ids, not {}", pairs, 4 * pairs, len);
  tokens.resize(size_t(n * len));
  targets.resize(size_t(n * len));
  const uint64_t stream = eval ? ~seed : seed;  // held-out rows never coincide with training rows
  for (int64_t r = 0; r < n; ++r) {
    const uint64_t index = (uint64_t(step) << 24) + uint64_t(row0 + r);
    std::mt19937_64 pick(index ^ (stream * 0x9E3779B97F4A7C15ull));
    const int64_t filler = int64_t(pick() % uint64_t(len - 4 * pairs + 1));
    retrieval_sequence(stream, index, len, pairs, filler, tokens.data() + r * len, targets.data() + r * len);
  }
}

}  // namespace mmx::train
