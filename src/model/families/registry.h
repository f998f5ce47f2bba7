// Model families by HF architectures[0] string. A name, once registered, is never renamed.
#pragma once

#include <memory>

#include "model/model.h"
#include "model/weights.h"

namespace mmx {

std::unique_ptr<Model> make_minimax_m2(ModelConfig cfg, ModelWeights weights);
std::unique_ptr<Model> make_minimax_text01(ModelConfig cfg, ModelWeights weights);
std::unique_ptr<Model> make_minimax_m3(ModelConfig cfg, ModelWeights weights);

}  // namespace mmx
