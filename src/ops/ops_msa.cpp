// mmx::ops::* entry points of the MSA family (ops/msa.h): validate arguments, pick the
// implementation (ref when use_ref()), call it. Also the family's argument checks (declared in
// cpu/msa.h, shared with ref/msa.cpp): shapes and dtypes exactly as documented, plus the index
// tensors (positions, block table entries that can be read, selected block ids) range-checked,
// since a bad id would otherwise be a silent out-of-bounds read.
//
// Not here: any arithmetic.
#include <fmt/format.h>

#include <initializer_list>

#include "ops/backend.h"
#include "ops/cpu/msa.h"
#include "ops/msa.h"

namespace mmx::ops {

namespace check {

namespace {

void expect(const Tensor& t, DType dtype, std::initializer_list<int64_t> shape, const char* op,
            const char* name) {
  bool ok = t.data != nullptr || t.numel() == 0;
  ok = ok && t.dtype == dtype && t.ndim == int(shape.size());
  int i = 0;
  for (int64_t d : shape) ok = ok && t.shape[i++] == d;
  MMX_CHECK(ok, "{}: {} is {} {}, expected {} with {} dims", op, name, dtype_name(t.dtype),
            t.shape_str(), dtype_name(dtype), shape.size());
}

// KV / index-key pages: F32 or BF16 (the KV cache's storage dtype), shape as given.
void expect_pages(const Tensor& t, std::initializer_list<int64_t> shape, const char* op,
                  const char* name) {
  MMX_CHECK(t.dtype == DType::kF32 || t.dtype == DType::kBF16,
            "{}: {} is {} {}, but KV pages must be F32 or BF16", op, name, dtype_name(t.dtype),
            t.shape_str());
  expect(t, t.dtype, shape, op, name);
}

// selected [G, n_q, K]: per row a prefix of >= 1 distinct ids in [0, ⌊p_i/B⌋], then -1s.
void selected_ids(const Tensor& selected, const Tensor& positions, int64_t B, const char* op) {
  const int64_t G = selected.dim(0), n_q = selected.dim(1), K = selected.dim(2);
  const int32_t* sel = selected.ptr<int32_t>();
  const int32_t* pos = positions.ptr<int32_t>();
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < n_q; ++i) {
      const int32_t* s = sel + (g * n_q + i) * K;
      const int64_t local = pos[i] / B;
      int64_t n = 0;
      while (n < K && s[n] >= 0) ++n;
      MMX_CHECK(n >= 1, "{}: selected[{}, {}] has no valid block", op, g, i);
      for (int64_t a = 0; a < K; ++a) {
        if (a >= n) {
          MMX_CHECK(s[a] == -1, "{}: selected[{}, {}, {}] = {} after the -1 padding started", op,
                    g, i, a, s[a]);
          continue;
        }
        MMX_CHECK(s[a] <= local, "{}: selected[{}, {}, {}] = {}, but the query at position {} "
                  "sees blocks 0..{}", op, g, i, a, s[a], pos[i], local);
        for (int64_t c = 0; c < a; ++c)
          MMX_CHECK(s[c] != s[a], "{}: selected[{}, {}] repeats block {}", op, g, i, s[a]);
      }
    }
}

}  // namespace

void msa_paged(const Tensor& pages, const Tensor& block_table, const Tensor& positions,
               int64_t n_keys, const char* op) {
  MMX_CHECK(pages.ndim >= 2 && pages.dim(1) >= 1, "{}: pages {}", op, pages.shape_str());
  MMX_CHECK(block_table.ndim == 1 && block_table.dtype == DType::kI32,
            "{}: block_table is {} {}", op, dtype_name(block_table.dtype), block_table.shape_str());
  MMX_CHECK(positions.ndim == 1 && positions.dtype == DType::kI32, "{}: positions is {} {}", op,
            dtype_name(positions.dtype), positions.shape_str());
  const int64_t B = pages.dim(1), n_pages = pages.dim(0);
  const int64_t need = (n_keys + B - 1) / B;
  MMX_CHECK(n_keys >= 0 && block_table.dim(0) >= need,
            "{}: n_keys {} needs {} blocks of {}, block_table has {}", op, n_keys, need, B,
            block_table.dim(0));
  const int32_t* bt = block_table.ptr<int32_t>();
  for (int64_t b = 0; b < need; ++b)
    MMX_CHECK(bt[b] >= 0 && bt[b] < n_pages, "{}: block_table[{}] = {} outside [0, {})", op, b,
              bt[b], n_pages);
  const int32_t* p = positions.ptr<int32_t>();
  for (int64_t i = 0; i < positions.dim(0); ++i)
    MMX_CHECK(p[i] >= 0 && p[i] < n_keys, "{}: positions[{}] = {} outside [0, n_keys = {})", op,
              i, p[i], n_keys);
}

void msa_index_select(const Tensor& iq, const Tensor& ik_pages, const Tensor& block_table,
                      const Tensor& positions, int64_t n_keys, const Tensor& selected) {
  const char* op = "msa_index_select";
  MMX_CHECK(iq.ndim == 3 && ik_pages.ndim == 3 && selected.ndim == 3,
            "{}: iq {} ik_pages {} selected {}", op, iq.shape_str(), ik_pages.shape_str(),
            selected.shape_str());
  const int64_t n_q = iq.dim(0), G = iq.dim(1), d = iq.dim(2), K = selected.dim(2);
  expect(iq, DType::kF32, {n_q, G, d}, op, "iq");
  expect_pages(ik_pages, {ik_pages.dim(0), ik_pages.dim(1), d}, op, "ik_pages");
  expect(positions, DType::kI32, {n_q}, op, "positions");
  expect(selected, DType::kI32, {G, n_q, K}, op, "selected");
  MMX_CHECK(K >= 1, "{}: K = {}", op, K);
  msa_paged(ik_pages, block_table, positions, n_keys, op);
}

void attention_paged(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                     const Tensor& block_table, const Tensor& positions, int64_t n_keys,
                     const Tensor& selected, const Tensor& out, const char* op) {
  MMX_CHECK(q.ndim == 3 && k_pages.ndim == 4, "{}: q {} k_pages {}", op, q.shape_str(),
            k_pages.shape_str());
  const int64_t n_q = q.dim(0), n_heads = q.dim(1), d = q.dim(2);
  const int64_t n_pages = k_pages.dim(0), B = k_pages.dim(1), n_kvh = k_pages.dim(2);
  expect(q, DType::kF32, {n_q, n_heads, d}, op, "q");
  expect_pages(k_pages, {n_pages, B, n_kvh, d}, op, "k_pages");
  expect_pages(v_pages, {n_pages, B, n_kvh, d}, op, "v_pages");
  MMX_CHECK(v_pages.dtype == k_pages.dtype, "{}: k_pages are {} but v_pages {} (one KV dtype)", op,
            dtype_name(k_pages.dtype), dtype_name(v_pages.dtype));
  expect(positions, DType::kI32, {n_q}, op, "positions");
  expect(out, DType::kF32, {n_q, n_heads, d}, op, "out");
  MMX_CHECK(n_kvh > 0 && n_heads % n_kvh == 0, "{}: {} heads, {} kv heads", op, n_heads, n_kvh);
  MMX_CHECK(out.numel() == 0 ||
                (out.data != q.data && out.data != k_pages.data && out.data != v_pages.data),
            "{}: out aliases an input", op);
  msa_paged(k_pages, block_table, positions, n_keys, op);
  if (selected.ndim != 0) {  // Tensor() = dense
    MMX_CHECK(selected.ndim == 3, "{}: selected {}", op, selected.shape_str());
    expect(selected, DType::kI32, {n_kvh, n_q, selected.dim(2)}, op, "selected");
    MMX_CHECK(selected.dim(2) >= 1, "{}: K = {}", op, selected.dim(2));
    selected_ids(selected, positions, B, op);
  }
}

void msa_selection_stats(const Tensor& q, const Tensor& k_pages, const Tensor& block_table,
                         const Tensor& positions, int64_t n_keys, const Tensor& selected,
                         int top_n, const Tensor& recall, const Tensor& coverage) {
  const char* op = "msa_selection_stats";
  MMX_CHECK(q.ndim == 3 && k_pages.ndim == 4 && selected.ndim == 3,
            "{}: q {} k_pages {} selected {}", op, q.shape_str(), k_pages.shape_str(),
            selected.shape_str());
  const int64_t n_q = q.dim(0), n_heads = q.dim(1), d = q.dim(2);
  const int64_t n_pages = k_pages.dim(0), B = k_pages.dim(1), n_kvh = k_pages.dim(2);
  expect(q, DType::kF32, {n_q, n_heads, d}, op, "q");
  expect_pages(k_pages, {n_pages, B, n_kvh, d}, op, "k_pages");
  expect(positions, DType::kI32, {n_q}, op, "positions");
  expect(selected, DType::kI32, {n_kvh, n_q, selected.dim(2)}, op, "selected");
  expect(recall, DType::kF32, {n_kvh, n_q}, op, "recall");
  expect(coverage, DType::kF32, {n_kvh, n_q}, op, "coverage");
  MMX_CHECK(n_kvh > 0 && n_heads % n_kvh == 0, "{}: {} heads, {} kv heads", op, n_heads, n_kvh);
  MMX_CHECK(top_n >= 1 && selected.dim(2) >= 1, "{}: top_n {} K {}", op, top_n, selected.dim(2));
  msa_paged(k_pages, block_table, positions, n_keys, op);
  selected_ids(selected, positions, B, op);
}

}  // namespace check

void msa_index_select(const Tensor& iq, const Tensor& ik_pages, const Tensor& block_table,
                      const Tensor& positions, int64_t n_keys, Tensor& selected) {
  check::msa_index_select(iq, ik_pages, block_table, positions, n_keys, selected);
  if (selected.numel() == 0) return;
  if (use_ref())
    return ref::msa_index_select(iq, ik_pages, block_table, positions, n_keys, selected);
  cpu::msa_index_select(iq, ik_pages, block_table, positions, n_keys, selected);
}

void attention_block_sparse(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                            const Tensor& block_table, const Tensor& positions, int64_t n_keys,
                            const Tensor& selected, float scale, Tensor& out) {
  MMX_CHECK(selected.ndim == 3, "attention_block_sparse: selected {}", selected.shape_str());
  check::attention_paged(q, k_pages, v_pages, block_table, positions, n_keys, selected, out,
                         "attention_block_sparse");
  if (out.numel() == 0) return;
  if (use_ref())
    return ref::attention_block_sparse(q, k_pages, v_pages, block_table, positions, n_keys,
                                       selected, scale, out);
  cpu::attention_paged(q, k_pages, v_pages, block_table, positions, selected, scale, out);
}

void attention_paged(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
                     const Tensor& block_table, const Tensor& positions, int64_t n_keys,
                     float scale, Tensor& out) {
  check::attention_paged(q, k_pages, v_pages, block_table, positions, n_keys, Tensor(), out,
                         "attention_paged");
  if (out.numel() == 0) return;
  if (use_ref())
    return ref::attention_paged(q, k_pages, v_pages, block_table, positions, n_keys, scale, out);
  cpu::attention_paged(q, k_pages, v_pages, block_table, positions, Tensor(), scale, out);
}

void msa_selection_stats(const Tensor& q, const Tensor& k_pages, const Tensor& block_table,
                         const Tensor& positions, int64_t n_keys, const Tensor& selected,
                         float scale, int top_n, Tensor& recall, Tensor& coverage) {
  check::msa_selection_stats(q, k_pages, block_table, positions, n_keys, selected, top_n, recall,
                             coverage);
  if (recall.numel() == 0) return;
  if (use_ref())
    return ref::msa_selection_stats(q, k_pages, block_table, positions, n_keys, selected, scale,
                                    top_n, recall, coverage);
  cpu::msa_selection_stats(q, k_pages, block_table, positions, selected, scale, top_n, recall,
                           coverage);
}

}  // namespace mmx::ops
