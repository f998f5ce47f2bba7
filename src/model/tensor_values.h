// TensorValues: new values for one checkpoint tensor, by its checkpoint name — what a weight push
// (Model::update_weights, EngineApi::update_weights) takes. Kept apart from model.h so the
// engine's interface can name it without pulling in the model.
//
// Not here: where the values come from (the trainer's ParamSet: rl/rollout.h adapts it) or how
// they are stored (model/weight_update.cpp).
#pragma once

#include <span>
#include <string>

namespace mmx {

struct TensorValues {
  std::string name;               // the checkpoint (HF) name, model/schema.h
  std::span<const float> values;  // every element, in the checkpoint's row-major layout
};

}  // namespace mmx
