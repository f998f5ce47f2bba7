// A trained checkpoint must load in the inference engine unchanged: its logits on `ids` equal the
// float training graph's on the same weights, within the model-level tolerance of
// docs/numerics.md (1e-4 · max |logit|). Shared by the trainer tests of every family.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "model/config.h"
#include "model/model.h"
#include "train/graph.h"
#include "train/params.h"

namespace mmx::train {

inline void expect_engine_logits_equal_graph(const std::string& dir, const std::vector<int32_t>& ids) {
  auto model = load_model(dir);
  const Buffer want = prefill_logits(*model, ids, 0);
  const ModelConfig cfg = load_config(dir);
  ParamSet<float> P(param_layout(cfg));
  load_params(dir, P);
  const int64_t T = int64_t(ids.size());
  auto g = make_graph<float>(cfg, P, 1, T);
  std::vector<int32_t> tg(ids.size(), -1);
  std::vector<float> got(static_cast<size_t>(T * cfg.vocab_size));
  g->forward_loss(TrainBatch{1, T, ids.data(), tg.data(), nullptr, nullptr}, got.data());
  double mx = 0, diff = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    mx = std::max(mx, std::fabs(double(want.t().f32()[i])));
    diff = std::max(diff, std::fabs(double(got[i]) - want.t().f32()[i]));
  }
  EXPECT_LE(diff, 1e-4 * mx) << dir << ": engine vs training graph logits";
}

}  // namespace mmx::train
