// OpenAI request bodies -> validated structs (step 1 of the data flow: HTTP -> parse).
//
// Everything a client can get wrong is checked here and reported as ApiError 400 naming the
// field: malformed JSON, invalid UTF-8, wrong types, out-of-range sampling parameters, unknown
// roles. Which top-level fields are known, honoured or refused is request_fields.h's table
// (unknown fields are 400, as OpenAI answers them). Limits that need the model
// (prompt longer than the context, token ids outside the vocabulary) are checked by the routes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat/constraints.h"
#include "chat/conversation.h"
#include "chat/turn.h"
#include "engine/sampler.h"

namespace mmx::server {

using ojson = nlohmann::ordered_json;

constexpr int kMaxChoices = 16;       // n in 1..16
constexpr int kMaxTopLogprobs = 20;   // top_logprobs in 0..20
constexpr int kMaxStopStrings = 16;
constexpr int kMaxLogitBias = 1024;   // logit_bias entries (OpenAI allows 300)
constexpr int kMaxJsonDepth = 64;    // deeper request bodies are refused (400)

// Fields shared by /v1/chat/completions and /v1/completions.
struct GenerationParams {
  std::string model;                  // "" when the client did not name one
  // temperature, top_p, top_k, min_p, seed, penalties, logit_bias, min_tokens; what the request
  // does not give comes from the checkpoint's generation_config.json (ServedModel::sampling).
  SamplingParams sampling;
  bool has_seed = false;              // seed given: choice i uses seed + i; else the server draws one
  bool ignore_eos = false;            // vLLM's: generate past the model's eos
  std::optional<int64_t> max_tokens;  // >= 1; none = up to the context limit
  std::vector<std::string> stop;      // non-empty strings, matched on the output text
  int n = 1;                          // independent choices, 1..kMaxChoices
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  bool logprobs = false;
  int top_logprobs = 0;               // 0..kMaxTopLogprobs
  // Structured output (src/grammar, docs/structured-output.md): what every choice must match.
  using Structure = chat::OutputStructure::Kind;
  Structure structure = Structure::kNone;
  ojson json_schema;                  // kJsonSchema: response_format.json_schema.schema
  std::string grammar;                // kGrammar: GBNF text (llama.cpp's `grammar` field)
};

// A chat body: the generation fields, and the conversation (take_conversation hands it to src/chat).
struct ChatRequest : GenerationParams {
  ojson messages;                  // array of {role, content, ...} (roles checked)
  ojson tools;                     // array, or null when absent or tool_choice == "none"
  std::string tool_choice = "auto";  // "auto" | "none" | "required" | "function" (forced_tool)
  std::string forced_tool;           // tool_choice {"type": "function", "function": {"name": ...}}
  ojson template_kwargs;           // chat_template_kwargs object, or null
  std::string reasoning_effort;    // "" | none | minimal | low | medium | high | xhigh (chat/thinking.h maps it)
  bool parallel_tool_calls = true; // false: a choice ends after its first tool call (TurnOptions::max_tool_calls)
};

struct CompletionRequest : GenerationParams {
  std::string prompt_text;         // used when prompt_ids is empty
  std::vector<int32_t> prompt_ids; // prompt given as a list of token ids
};

// POST /tokenize and /detokenize (llama-server's field names and defaults).
struct TokenizeRequest {
  std::string content;
  bool add_special = false;   // the tokenizer's post-processor tokens (e.g. BOS); needs parse_special
  bool parse_special = true;  // special-token strings become their ids (false: every byte is text)
};
struct DetokenizeRequest {
  std::vector<int32_t> tokens;  // in [0, INT32_MAX]; the vocabulary is checked by the route
  bool skip_special = false;
};

// Body bytes -> JSON object. Throws ApiError 400 for invalid UTF-8, malformed JSON or a
// non-object top level.
ojson parse_body(const std::string& body);

// `defaults`: the sampling a request starts from (the checkpoint's generation_config.json).
ChatRequest parse_chat_request(const ojson& body, const SamplingParams& defaults = {});
CompletionRequest parse_completion_request(const ojson& body, const SamplingParams& defaults = {});
TokenizeRequest parse_tokenize_request(const ojson& body);
DetokenizeRequest parse_detokenize_request(const ojson& body);

// The conversation of a parsed chat body, for chat::prepare_turn: r.messages and r.template_kwargs
// are moved out (left null); tools, tool_choice, forced_tool and reasoning_effort are copied
// (the routes' structured output still reads them).
chat::Conversation take_conversation(ChatRequest& r);
// What p says about sampling and length, for chat::make_gen_request.
chat::GenLimits gen_limits(const GenerationParams& p);
// What p's choices must match (response_format / grammar), for chat::Constraints::make.
chat::OutputStructure output_structure(const GenerationParams& p);

}  // namespace mmx::server
