// What the HTTP layer knows about the model it serves: its name, tokenizer, chat template,
// output format and end-of-sequence ids. Borrowed pointers: the owner (mmx serve, or a test)
// keeps them alive for the server's lifetime.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/output_parser.h"
#include "engine/sampler.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mmx::server {

struct ServedModel {
  std::string name = "minimax";                   // the "model" clients must send (or omit)
  const tok::Tokenizer* tokenizer = nullptr;      // required
  const ChatTemplate* chat_template = nullptr;    // null: /v1/chat/completions answers 400
  chat::OutputFormat format = chat::OutputFormat::kM2;
  std::vector<int32_t> eos_ids;                   // generation stops here; never shown as text
  SamplingParams sampling;                        // defaults for what a request omits (generation_config.json)
  int64_t created = 0;                            // unix time for /v1/models
};

// The reasoning start tag a generation prompt may end with ("<think>", or "<mm:think>" for M3).
const char* reasoning_open_tag(chat::OutputFormat f);

}  // namespace mmx::server
