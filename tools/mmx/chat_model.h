// What `mmx serve` and `mmx chat` share to talk to a chat model: the output parser for its
// family, and the conversation's view of it (chat::ServedModel: name, tokenizer, template, format,
// eos ids, sampling defaults), so both render and parse a conversation the same way.
#pragma once

#include <string>

#include "chat/output_parser.h"
#include "model/model.h"
#include "chat/served_model.h"

namespace mmx::cli {

// The output parser for the model family; `name` (--reasoning-format) picks between the M2
// variants: "auto" (by family), "minimax_m2", "minimax_m2_append_think", "minimax_m3", "minimax".
// Fails with a message for an unknown name or one that does not match the family.
chat::OutputFormat pick_format(Family family, const std::string& name);

// sm.format, sm.eos_ids and sm.sampling from the loaded model and checkpoint `dir`; the caller
// sets name, tokenizer and chat_template.
void describe_model(const Model& model, const std::string& dir, const std::string& reasoning_format,
                    chat::ServedModel& sm);

}  // namespace mmx::cli
