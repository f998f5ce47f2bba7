// Reference paged-attention / MSA ops (ops/ops.h), fp64, straight from spec §5.6: every index score, block max,
// attention score, softmax and weighted sum in double, one (query, head) at a time; the block
// selection is a full stable sort. Keys are addressed one at a time through the block table
// (token j -> page block_table[j / B], row j % B).
// Not here: blocking, threads, partial selection, online softmax.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "ops/check.h"
#include "ops/ops.h"

namespace mmx::ops::ref {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Element c of key j, KV head h (pages [n_pages, B, n_kv_heads, d]) or of the index key j
// (pages [n_pages, B, d], h = 0 and n_kvh = 1); F32, BF16 or (index keys) F8 E4M3 pages,
// exactly as a double.
double page_at(const Tensor& pages, const int32_t* bt, int64_t n_kvh, int64_t j, int64_t h,
               int64_t c) {
  const int64_t B = pages.dim(1), d = pages.dim(pages.ndim - 1);
  const int64_t page = bt[j / B], row = j % B, e = ((page * B + row) * n_kvh + h) * d + c;
  if (pages.dtype == DType::kBF16) return double(bf16_to_f32(pages.ptr<uint16_t>()[e]));
  if (pages.dtype == DType::kF8E4M3) return double(f8e4m3_to_f32(pages.ptr<uint8_t>()[e]));
  return double(pages.f32()[e]);
}

// Causal softmax attention of query i, head h over the keys j <= p_i with allowed[j / B].
void attend(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages, const int32_t* bt,
            int64_t i, int64_t h, int64_t p, const std::vector<char>& allowed, float scale,
            Tensor& out) {
  const int64_t n_heads = q.dim(1), d = q.dim(2), B = k_pages.dim(1), n_kvh = k_pages.dim(2);
  const int64_t g = h / (n_heads / n_kvh);
  const float* qi = q.f32() + (i * n_heads + h) * d;
  std::vector<int64_t> keys;
  for (int64_t j = 0; j <= p; ++j)
    if (allowed[size_t(j / B)]) keys.push_back(j);
  std::vector<double> s(keys.size());
  for (size_t t = 0; t < keys.size(); ++t) {
    double dot = 0.0;
    for (int64_t c = 0; c < d; ++c)
      dot += double(qi[c]) * page_at(k_pages, bt, n_kvh, keys[t], g, c);
    s[t] = double(scale) * dot;
  }
  const double m = *std::max_element(s.begin(), s.end());
  double sum = 0.0;
  for (double& e : s) sum += (e = std::exp(e - m));
  for (int64_t c = 0; c < d; ++c) {
    double acc = 0.0;
    for (size_t t = 0; t < keys.size(); ++t)
      acc += s[t] * page_at(v_pages, bt, n_kvh, keys[t], g, c);
    out.f32()[(i * n_heads + h) * d + c] = float(acc / sum);
  }
}

}  // namespace

void msa_block_scores(const Tensor& iq, const Tensor& ik_pages, const Tensor& block_table,
                      const Tensor& positions, int64_t n_keys, int64_t n_blocks, double* scores) {
  check::msa_paged(ik_pages, block_table, positions, n_keys, "msa_block_scores");
  const int64_t n_q = iq.dim(0), G = iq.dim(1), d = iq.dim(2), B = ik_pages.dim(1);
  const int32_t* bt = block_table.ptr<int32_t>();
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < n_q; ++i) {
      const int64_t p = positions.ptr<int32_t>()[i];
      const float* qv = iq.f32() + (i * G + g) * d;
      for (int64_t b = 0; b < n_blocks; ++b) {
        double best = kNegInf;  // no visible key in block b -> -inf
        for (int64_t j = b * B; j < (b + 1) * B && j <= p; ++j) {
          double z = 0.0;
          for (int64_t c = 0; c < d; ++c) z += double(qv[c]) * page_at(ik_pages, bt, 1, j, 0, c);
          best = std::max(best, z);
        }
        scores[(g * n_q + i) * n_blocks + b] = best;
      }
    }
}

void msa_index_select(const Tensor& iq, const Tensor& ik_pages, const Tensor& block_table,
                      const Tensor& positions, int64_t n_keys, Tensor& selected) {
  check::msa_index_select(iq, ik_pages, block_table, positions, n_keys, selected);
  const int64_t n_q = iq.dim(0), G = iq.dim(1), B = ik_pages.dim(1), K = selected.dim(2);
  const int64_t n_blocks = (n_keys + B - 1) / B;
  std::vector<double> S(size_t(G * n_q * n_blocks));
  msa_block_scores(iq, ik_pages, block_table, positions, n_keys, n_blocks, S.data());
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < n_q; ++i) {
      const double* s = S.data() + (g * n_q + i) * n_blocks;
      const int64_t local = positions.ptr<int32_t>()[i] / B, nvis = local + 1;
      std::vector<int32_t> ids;
      if (nvis <= K) {
        for (int64_t b = 0; b < nvis; ++b) ids.push_back(int32_t(b));
      } else {
        std::vector<int32_t> cand(size_t(nvis - 1));  // the non-local blocks, ascending ids
        std::iota(cand.begin(), cand.end(), 0);
        std::stable_sort(cand.begin(), cand.end(),
                         [&](int32_t a, int32_t b) { return s[a] > s[b]; });  // ties keep id asc
        ids.assign(cand.begin(), cand.begin() + (K - 1));
        ids.push_back(int32_t(local));
      }
      int32_t* out = selected.ptr<int32_t>() + (g * n_q + i) * K;
      for (int64_t a = 0; a < K; ++a) out[a] = a < int64_t(ids.size()) ? ids[size_t(a)] : -1;
    }
}

void attention_block_sparse(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                            const Tensor& block_table, const Tensor& positions, int64_t n_keys,
                            const Tensor& selected, float scale, Tensor& out) {
  check::paged_attention(q, k_pages, v_pages, block_table, positions, n_keys, selected, out,
                         "attention_block_sparse");
  const int64_t n_q = q.dim(0), n_heads = q.dim(1), B = k_pages.dim(1), n_kvh = k_pages.dim(2);
  const int64_t K = selected.dim(2);
  for (int64_t i = 0; i < n_q; ++i) {
    const int64_t p = positions.ptr<int32_t>()[i];
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t g = h / (n_heads / n_kvh);
      std::vector<char> allowed(size_t(p / B + 1), 0);
      const int32_t* s = selected.ptr<int32_t>() + (g * n_q + i) * K;
      for (int64_t a = 0; a < K && s[a] >= 0; ++a) allowed[size_t(s[a])] = 1;
      attend(q, k_pages, v_pages, block_table.ptr<int32_t>(), i, h, p, allowed, scale, out);
    }
  }
}

void attention_dense_paged(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                     const Tensor& block_table, const Tensor& positions, int64_t n_keys,
                     float scale, Tensor& out) {
  check::paged_attention(q, k_pages, v_pages, block_table, positions, n_keys, Tensor(), out,
                         "attention_dense_paged");
  const int64_t n_q = q.dim(0), n_heads = q.dim(1), B = k_pages.dim(1);
  for (int64_t i = 0; i < n_q; ++i) {
    const int64_t p = positions.ptr<int32_t>()[i];
    const std::vector<char> allowed(size_t(p / B + 1), 1);
    for (int64_t h = 0; h < n_heads; ++h)
      attend(q, k_pages, v_pages, block_table.ptr<int32_t>(), i, h, p, allowed, scale, out);
  }
}

void msa_selection_stats(const Tensor& q, const Tensor& k_pages, const Tensor& block_table,
                         const Tensor& positions, int64_t n_keys, const Tensor& selected,
                         float scale, int top_n, Tensor& recall, Tensor& coverage) {
  check::msa_selection_stats(q, k_pages, block_table, positions, n_keys, selected, top_n, recall,
                             coverage);
  const int64_t n_q = q.dim(0), n_heads = q.dim(1), d = q.dim(2);
  const int64_t B = k_pages.dim(1), n_kvh = k_pages.dim(2), K = selected.dim(2);
  const int64_t group = n_heads / n_kvh;
  const int32_t* bt = block_table.ptr<int32_t>();
  for (int64_t g = 0; g < n_kvh; ++g)
    for (int64_t i = 0; i < n_q; ++i) {
      const int64_t p = positions.ptr<int32_t>()[i], nvis = p / B + 1;
      std::vector<double> mass(size_t(nvis), 0.0);
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        // full causal softmax of head h over keys 0..p
        const float* qh = q.f32() + (i * n_heads + h) * d;
        std::vector<double> s(size_t(p + 1));
        for (int64_t j = 0; j <= p; ++j) {
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c)
            dot += double(qh[c]) * page_at(k_pages, bt, n_kvh, j, g, c);
          s[size_t(j)] = double(scale) * dot;
        }
        const double m = *std::max_element(s.begin(), s.end());
        double sum = 0.0;
        for (double& e : s) sum += (e = std::exp(e - m));
        for (int64_t j = 0; j <= p; ++j) mass[size_t(j / B)] += s[size_t(j)] / sum / double(group);
      }
      std::vector<int32_t> order(static_cast<size_t>(nvis));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return mass[size_t(a)] > mass[size_t(b)]; });
      const int64_t n_top = std::min<int64_t>(top_n, nvis);
      const int32_t* sel = selected.ptr<int32_t>() + (g * n_q + i) * K;
      int64_t hits = 0;
      double cov = 0.0;
      for (int64_t a = 0; a < K && sel[a] >= 0; ++a) {
        cov += mass[size_t(sel[a])];
        for (int64_t t = 0; t < n_top; ++t) hits += order[size_t(t)] == sel[a];
      }
      recall.f32()[g * n_q + i] = float(double(hits) / double(n_top));
      coverage.f32()[g * n_q + i] = float(cov);
    }
}

}  // namespace mmx::ops::ref
