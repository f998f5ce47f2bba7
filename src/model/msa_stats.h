// MSA instrumentation (issue: seed 000 §6 item 3): per sparse layer and GQA group, how well the
// indexer's block selection matches full attention, and where the time goes.
//   recall   = |true top-K blocks under full attention ∩ selected| / |true top-K|  (K = topk, 16)
//   coverage = share of the full-attention probability mass inside the selected blocks
// (ops::msa_selection_stats defines both exactly). Collected only into a collector the caller
// hands the model (Model::set_msa_stats; it runs full fp64 attention per query, so it is for
// analysis, not serving): `mmx generate --msa-stats`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mmx {

struct MsaLayerStats {
  int64_t n_queries = 0;              // queries seen (per group)
  std::vector<double> recall_sum;     // [groups]
  std::vector<double> coverage_sum;   // [groups]
  double index_s = 0;                 // index branch: projections, norms, RoPE, scan + selection
  double attention_s = 0;             // block-sparse attention over the selected pages
};

class MsaStats {
 public:
  void reset() { layers_.clear(); }
  void add_timing(int layer, double index_s, double attention_s);
  // recall, coverage: [groups * n_q] row-major (group-major), as written by the op.
  void add_selection(int layer, int groups, int64_t n_q, const float* recall, const float* coverage);
  const std::map<int, MsaLayerStats>& layers() const { return layers_; }
  std::string report() const;  // a markdown table, one row per layer and group

 private:
  std::map<int, MsaLayerStats> layers_;
};

}  // namespace mmx
