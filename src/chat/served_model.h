// What a conversation needs to know about the model that answers it: its name, tokenizer, chat
// template, output format, end-of-sequence ids and sampling defaults. Shared by the server (its
// "model" field, /v1/models), `mmx chat` and, next, RL rollouts. Borrowed pointers: the owner
// (mmx serve, mmx chat, a test) keeps them alive for as long as the view is used.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/output_parser.h"
#include "engine/sampler.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mmx::chat {

struct ServedModel {
  std::string name = "minimax";                   // the "model" clients must send (or omit)
  const tok::Tokenizer* tokenizer = nullptr;      // required
  const ChatTemplate* chat_template = nullptr;    // null: no chat turns (the server's /v1/chat/completions answers 400)
  OutputFormat format = OutputFormat::kM2;
  std::vector<int32_t> eos_ids;                   // generation stops here; never shown as text
  SamplingParams sampling;                        // defaults for what a request omits (generation_config.json)
  int64_t created = 0;                            // unix time for /v1/models
};

// The reasoning start tag a generation prompt may end with ("<think>", or "<mm:think>" for M3).
const char* reasoning_open_tag(OutputFormat f);

}  // namespace mmx::chat
