// The toy tasks of rl/task.h as the RL loop's RlTask (rl/loop.h), and the "task" object of an
// `mmx rl train` config: {"kind": "rev"|"add", "min_len", "max_len", "letters", "digits",
// "eval_fraction"} (unknown keys refused). Training prompts come from the train split (seeded by
// the run seed and the step), evaluation prompts from the held-out split (fixed, distinct).
#pragma once

#include <nlohmann/json.hpp>

#include "rl/loop.h"
#include "rl/task.h"

namespace mmx::tok { class Tokenizer; }

namespace mmx::rl {

// Throws mmx::Error naming the key (`where`: the config file).
TaskSpec task_spec_from_json(const nlohmann::json& j, const std::string& where);
RlTask make_rl_task(const TaskSpec& spec, uint64_t seed, const tok::Tokenizer& tk);

}  // namespace mmx::rl
