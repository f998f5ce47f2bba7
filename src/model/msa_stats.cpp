#include "model/msa_stats.h"

#include <fmt/format.h>

namespace mmx {

void MsaStats::add_timing(int layer, double index_s, double attention_s) {
  MsaLayerStats& l = layers_[layer];
  l.index_s += index_s;
  l.attention_s += attention_s;
}

void MsaStats::add_selection(int layer, int groups, int64_t n_q, const float* recall, const float* coverage) {
  MsaLayerStats& l = layers_[layer];
  if (l.recall_sum.empty()) {
    l.recall_sum.assign(size_t(groups), 0.0);
    l.coverage_sum.assign(size_t(groups), 0.0);
  }
  for (int g = 0; g < groups; ++g)
    for (int64_t i = 0; i < n_q; ++i) {
      l.recall_sum[size_t(g)] += recall[g * n_q + i];
      l.coverage_sum[size_t(g)] += coverage[g * n_q + i];
    }
  l.n_queries += n_q;
}

std::string MsaStats::report() const {
  std::string s = "| layer | group | queries | recall of true top-K blocks | mass coverage | index ms | sparse attn ms |\n"
                  "|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& [il, l] : layers_)
    for (size_t g = 0; g < l.recall_sum.size(); ++g)
      s += fmt::format("| {} | {} | {} | {:.4f} | {:.4f} | {} | {} |\n", il, g, l.n_queries,
                       l.recall_sum[g] / double(l.n_queries), l.coverage_sum[g] / double(l.n_queries),
                       g == 0 ? fmt::format("{:.3f}", l.index_s * 1e3) : "",
                       g == 0 ? fmt::format("{:.3f}", l.attention_s * 1e3) : "");
  return s;
}

}  // namespace mmx
