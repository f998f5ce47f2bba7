// The per-family entry points of the trainer (private to src/train): each family's parameter list
// and training graph live in graph_<family>.cpp (graph_moe.cpp: M2 and Text-01 / M1); param_layout() and make_graph() dispatch here.
#pragma once

#include <memory>
#include <vector>

#include "train/graph.h"
#include "train/params.h"

namespace mmx::train {

// The checkpoint schema's tensors (model/schema.h) as parameters, in checkpoint order (params.cpp).
std::vector<ParamInfo> schema_params(const ModelConfig& c);

std::vector<ParamInfo> param_layout_moe(const ModelConfig& c);
template <class T>
std::unique_ptr<Graph<T>> make_graph_moe(const ModelConfig& c, ParamSet<T>& p, int64_t max_seqs, int64_t seq_len,
                                         const GraphOptions& opt);

// MiniMax-M3 (graph_m3.cpp): dense + MSA layers, dense MLP / MoE with a shared expert.
std::vector<ParamInfo> param_layout_m3(const ModelConfig& c);
template <class T>
std::unique_ptr<Graph<T>> make_graph_m3(const ModelConfig& c, ParamSet<T>& p, int64_t max_seqs, int64_t seq_len);

}  // namespace mmx::train
