// Argument validation for every op (see check.h). Shapes are checked against ops.h exactly;
// index tensors (row ids, token ids) are range-checked too, since an out-of-range id would
// otherwise be a silent out-of-bounds read or write.
#include "ops/check.h"

#include <initializer_list>

namespace mmx::ops::check {

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

bool is_float(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kF8E4M3;
}

void ids_in_range(const Tensor& ids, int64_t n, const char* op) {
  const int32_t* p = ids.ptr<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    MMX_CHECK(p[i] >= 0 && p[i] < n, "{}: id[{}] = {} outside [0, {})", op, i, p[i], n);
}

}  // namespace

void linear(const Linear& w) {
  MMX_CHECK(w.w.ndim == 2 && (is_float(w.w.dtype) || dtype_is_quant(w.w.dtype)), "Linear: w is {} {}",
            dtype_name(w.w.dtype), w.w.shape_str());
  MMX_CHECK(w.n_in() % dtype_block(w.w.dtype) == 0, "Linear: {} rows of {} are not whole blocks",
            dtype_name(w.w.dtype), w.n_in());
  if (w.w.dtype == DType::kF8E4M3) {
    MMX_CHECK(w.block_out > 0 && w.block_in > 0, "Linear: blocks {}x{}", w.block_out, w.block_in);
    const int64_t so = (w.n_out() + w.block_out - 1) / w.block_out;
    const int64_t si = (w.n_in() + w.block_in - 1) / w.block_in;
    MMX_CHECK(!w.scale.empty(), "Linear: F8E4M3 weight {} without a scale", w.w.shape_str());
    expect(w.scale, DType::kF32, {so, si}, "Linear", "scale");
  } else {
    MMX_CHECK(w.scale.empty(), "Linear: {} weight with a scale", dtype_name(w.w.dtype));
  }
}

void matmul(const Tensor& x, const Linear& w, const Tensor& y) {
  linear(w);
  expect(x, DType::kF32, {x.dim(0), w.n_in()}, "matmul", "x");
  expect(y, DType::kF32, {x.dim(0), w.n_out()}, "matmul", "y");
  MMX_CHECK(x.data != y.data || x.numel() == 0, "matmul: y aliases x");
}

void linear_dequant_rows(const Linear& w, int64_t row0, const Tensor& out) {
  linear(w);
  expect(out, DType::kF32, {out.dim(0), w.n_in()}, "linear_dequant_rows", "out");
  MMX_CHECK(row0 >= 0 && row0 + out.dim(0) <= w.n_out(), "linear_dequant_rows: rows [{}, {}) of {}",
            row0, row0 + out.dim(0), w.n_out());
}

void rms_norm(const Tensor& x, const Tensor& weight, const Tensor& y) {
  MMX_CHECK(x.ndim >= 1, "rms_norm: x is {}", x.shape_str());
  expect(weight, DType::kF32, {x.dim(-1)}, "rms_norm", "weight");
  same_f32(x, y, "rms_norm");
}

void same_f32(const Tensor& a, const Tensor& b, const char* op) {
  MMX_CHECK(a.dtype == DType::kF32 && b.dtype == DType::kF32 && a.same_shape(b),
            "{}: {} {} vs {} {}", op, dtype_name(a.dtype), a.shape_str(), dtype_name(b.dtype),
            b.shape_str());
}

void rope_neox(const Tensor& x, const Tensor& positions, int rotary_dim) {
  MMX_CHECK(x.ndim == 3 && x.dtype == DType::kF32, "rope_neox: x is {}", x.shape_str());
  expect(positions, DType::kI32, {x.dim(0)}, "rope_neox", "positions");
  MMX_CHECK(rotary_dim >= 0 && rotary_dim % 2 == 0 && rotary_dim <= x.dim(2),
            "rope_neox: rotary_dim {} with head_dim {}", rotary_dim, x.dim(2));
}

void attention_softmax(const Tensor& q, const Tensor& k, const Tensor& v, int64_t pos0,
                       const Tensor& out) {
  MMX_CHECK(q.ndim == 3 && k.ndim == 3, "attention_softmax: q {} k {}", q.shape_str(), k.shape_str());
  const int64_t n_q = q.dim(0), n_heads = q.dim(1), d = q.dim(2), n_kv = k.dim(0), n_kvh = k.dim(1);
  expect(q, DType::kF32, {n_q, n_heads, d}, "attention_softmax", "q");
  expect(k, DType::kF32, {n_kv, n_kvh, d}, "attention_softmax", "k");
  expect(v, DType::kF32, {n_kv, n_kvh, d}, "attention_softmax", "v");
  expect(out, DType::kF32, {n_q, n_heads, d}, "attention_softmax", "out");
  MMX_CHECK(n_kvh > 0 && n_heads % n_kvh == 0, "attention_softmax: {} heads, {} kv heads", n_heads,
            n_kvh);
  MMX_CHECK(pos0 >= 0 && pos0 + n_q <= n_kv, "attention_softmax: pos0 {} + n_q {} > n_kv {}", pos0,
            n_q, n_kv);
  MMX_CHECK(out.data != q.data && out.data != k.data && out.data != v.data,
            "attention_softmax: out aliases an input");
}

void moe_route_sigmoid(const Tensor& logits, const Tensor& bias, int k, const Tensor& ids,
                       const Tensor& weights) {
  MMX_CHECK(logits.ndim == 2, "moe_route_sigmoid: logits {}", logits.shape_str());
  const int64_t n = logits.dim(0), n_exp = logits.dim(1);
  expect(logits, DType::kF32, {n, n_exp}, "moe_route_sigmoid", "logits");
  if (!bias.empty()) expect(bias, DType::kF32, {n_exp}, "moe_route_sigmoid", "bias");
  MMX_CHECK(k >= 1 && k <= n_exp, "moe_route_sigmoid: k {} with {} experts", k, n_exp);
  expect(ids, DType::kI32, {n, k}, "moe_route_sigmoid", "ids");
  expect(weights, DType::kF32, {n, k}, "moe_route_sigmoid", "weights");
}

void moe_route_softmax(const Tensor& logits, int k, const Tensor& ids, const Tensor& weights) {
  MMX_CHECK(logits.ndim == 2, "moe_route_softmax: logits {}", logits.shape_str());
  const int64_t n = logits.dim(0), n_exp = logits.dim(1);
  expect(logits, DType::kF32, {n, n_exp}, "moe_route_softmax", "logits");
  MMX_CHECK(k >= 1 && k <= n_exp, "moe_route_softmax: k {} with {} experts", k, n_exp);
  expect(ids, DType::kI32, {n, k}, "moe_route_softmax", "ids");
  expect(weights, DType::kF32, {n, k}, "moe_route_softmax", "weights");
}

void attention_lightning(const Tensor& qkv, const Tensor& slopes, const Tensor& state,
                         const Tensor& out) {
  MMX_CHECK(qkv.ndim == 4 && qkv.dim(2) == 3, "attention_lightning: qkv {} (expected [n, heads, 3, dim])",
            qkv.shape_str());
  const int64_t n = qkv.dim(0), h = qkv.dim(1), d = qkv.dim(3);
  expect(qkv, DType::kF32, {n, h, 3, d}, "attention_lightning", "qkv");
  expect(slopes, DType::kF32, {h}, "attention_lightning", "slopes");
  expect(state, DType::kF32, {h, d, d}, "attention_lightning", "state");
  expect(out, DType::kF32, {n, h, d}, "attention_lightning", "out");
  MMX_CHECK(out.data != qkv.data && out.data != state.data, "attention_lightning: out aliases an input");
}

void rows_gather(const Tensor& src, const Tensor& row_ids, const Tensor& dst) {
  MMX_CHECK(src.ndim == 2 && row_ids.ndim == 1, "rows_gather: src {} ids {}", src.shape_str(),
            row_ids.shape_str());
  expect(src, DType::kF32, {src.dim(0), src.dim(1)}, "rows_gather", "src");
  expect(row_ids, DType::kI32, {row_ids.dim(0)}, "rows_gather", "row_ids");
  expect(dst, DType::kF32, {row_ids.dim(0), src.dim(1)}, "rows_gather", "dst");
  MMX_CHECK(dst.data != src.data || dst.numel() == 0, "rows_gather: dst aliases src");
  ids_in_range(row_ids, src.dim(0), "rows_gather");
}

void rows_scatter_add(const Tensor& src, const Tensor& row_ids, const Tensor& scale,
                      const Tensor& dst) {
  MMX_CHECK(src.ndim == 2 && dst.ndim == 2, "rows_scatter_add: src {} dst {}", src.shape_str(),
            dst.shape_str());
  const int64_t m = src.dim(0), d = src.dim(1);
  expect(src, DType::kF32, {m, d}, "rows_scatter_add", "src");
  expect(row_ids, DType::kI32, {m}, "rows_scatter_add", "row_ids");
  expect(scale, DType::kF32, {m}, "rows_scatter_add", "scale");
  expect(dst, DType::kF32, {dst.dim(0), d}, "rows_scatter_add", "dst");
  MMX_CHECK(dst.data != src.data || dst.numel() == 0, "rows_scatter_add: dst aliases src");
  ids_in_range(row_ids, dst.dim(0), "rows_scatter_add");
}

void embedding(const Tensor& table, const Tensor& ids, const Tensor& out) {
  MMX_CHECK(table.ndim == 2 && (table.dtype == DType::kF32 || table.dtype == DType::kF16 ||
                                table.dtype == DType::kBF16 || dtype_is_quant(table.dtype)),
            "embedding: table is {} {}", dtype_name(table.dtype), table.shape_str());
  MMX_CHECK(ids.ndim == 1, "embedding: ids {}", ids.shape_str());
  expect(ids, DType::kI32, {ids.dim(0)}, "embedding", "ids");
  expect(out, DType::kF32, {ids.dim(0), table.dim(1)}, "embedding", "out");
  ids_in_range(ids, table.dim(0), "embedding");
}

void to_f32(const Tensor& x, const Tensor& out) {
  MMX_CHECK(is_float(x.dtype), "to_f32: x is {}", dtype_name(x.dtype));
  MMX_CHECK(out.dtype == DType::kF32 && out.numel() == x.numel(), "to_f32: out {} {} for x {}",
            dtype_name(out.dtype), out.shape_str(), x.shape_str());
  MMX_CHECK(out.data != x.data || x.dtype == DType::kF32 || x.numel() == 0,
            "to_f32: out aliases a narrower x");
}

void quantize(const Tensor& x, const Tensor& out) {
  MMX_CHECK(x.dtype == DType::kF32 && x.ndim >= 1, "quantize: x is {} {}", dtype_name(x.dtype),
            x.shape_str());
  MMX_CHECK(out.dtype == DType::kF16 || out.dtype == DType::kBF16 || dtype_is_quant(out.dtype),
            "quantize: out dtype {}", dtype_name(out.dtype));
  MMX_CHECK(out.same_shape(x), "quantize: out {} for x {}", out.shape_str(), x.shape_str());
  MMX_CHECK(x.dim(-1) % dtype_block(out.dtype) == 0, "quantize: {} rows of {} are not whole blocks",
            dtype_name(out.dtype), x.dim(-1));
  MMX_CHECK(x.numel() == 0 || (x.data != nullptr && out.data != nullptr && out.data != x.data),
            "quantize: x or out has no data, or out aliases x");
}

// ---- the paged-attention / MSA family: positions, block-table entries that can be read and
// selected block ids are range-checked too ----
namespace {

// KV / index-key pages: F32 or BF16 (the KV cache's storage dtype), shape as given.
void expect_pages(const Tensor& t, std::initializer_list<int64_t> shape, const char* op,
                  const char* name, bool index_keys = false) {
  if (index_keys)
    MMX_CHECK(t.dtype == DType::kF32 || t.dtype == DType::kBF16 || t.dtype == DType::kF8E4M3,
              "{}: {} is {} {}, but index-key pages must be F32, BF16 or F8_E4M3", op, name,
              dtype_name(t.dtype), t.shape_str());
  else
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
  expect_pages(ik_pages, {ik_pages.dim(0), ik_pages.dim(1), d}, op, "ik_pages", true);
  expect(positions, DType::kI32, {n_q}, op, "positions");
  expect(selected, DType::kI32, {G, n_q, K}, op, "selected");
  MMX_CHECK(K >= 1, "{}: K = {}", op, K);
  msa_paged(ik_pages, block_table, positions, n_keys, op);
}

void paged_attention(const Tensor& q, const Tensor& k_pages, const Tensor& v_pages,
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

}  // namespace mmx::ops::check
