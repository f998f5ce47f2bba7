// One chat turn, ready for the engine: a conversation + the served model + the turn's options ->
// the prompt, the engine request and the factory of each choice's OutputStream. The one way a
// turn becomes an engine request, shared by the OpenAI and Anthropic routes (server/), `mmx chat`
// (tools/mmx/cmd_chat.cpp) and, next, RL rollouts (src/rl/) — none of them needs HTTP for it.
//
//   Conversation --apply_reasoning_effort (thinking.h)--> kwargs
//                --build_chat_prompt (prompt.h)---------> ChatPrompt (ids, starts_in_reasoning)
//                --make_gen_request---------------------> GenRequest (context check, max_tokens, stop ids)
//   PreparedTurn::make_stream(i) -> OutputStream (stop strings + OutputParser with choice i's id seed)
//
// Not here: structured output (constraints.h: a compiled-grammar cache the caller keeps, whose
// factory goes into GenRequest::constraint), submitting and reading the engine
// (server/generation.h, engine/generate.h), response shapes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "chat/conversation.h"
#include "chat/output_stream.h"
#include "chat/prompt.h"
#include "chat/served_model.h"
#include "engine/engine_api.h"

namespace mmx::chat {

// What a request says about sampling and length (the OpenAI fields both generation routes share).
struct GenLimits {
  SamplingParams sampling;             // choice i of n samples with sampling.seed + i (the engine's caller adds i)
  std::optional<int64_t> max_tokens;   // >= 1; none = default_max_tokens, or up to the context
  bool ignore_eos = false;             // the eos ids do not stop it
  bool logprobs = false;
  int top_logprobs = 0;
};

// The engine request for prompt `ids`: checks that the prompt leaves room in the context (ChatError
// kContextExceeded naming `prompt_param`), clamps max_tokens to what is left (default_max_tokens
// when p gives none; 0 = up to the context), sets the stop ids (unless ignore_eos), logprobs and a
// logit_bias checked against the vocabulary (kInvalid naming logit_bias). Also used for raw-prompt
// completions (server's /v1/completions).
GenRequest make_gen_request(const GenLimits& p, std::vector<int32_t> ids, int64_t context, int64_t default_max_tokens,
                            int64_t vocab, const std::vector<int32_t>& eos, const char* prompt_param);

struct TurnOptions {
  GenLimits gen;
  std::vector<std::string> stop;      // stop strings, matched on the output text
  size_t max_tool_calls = 0;          // 0 = any number; 1: a choice ends after its first call
                                      // (parallel_tool_calls false; output_stream.h)
  int64_t context_limit = 0;          // tokens the engine can hold for one sequence (prompt + reply)
  int64_t default_max_tokens = 0;     // max_tokens when gen.max_tokens is none (0 = up to the context)
  double drop_reasoning_over = 0;     // 0 = off; else a fraction of the context (prompt.h)
  bool special_in_content = false;    // prompt.h
  ParserOptions parser;               // what the OutputParser does with odd output (output_parser.h)
  // What makes this turn's tool-call ids differ from other turns' (the server: the time and a turn
  // counter; `mmx chat`: the turn's sampling seed, so a seeded session repeats). The ONE rule for
  // the ids of choice i: OutputParser id seed = tool_call_id_seed + 7919 * i (prepare_turn).
  uint64_t tool_call_id_seed = 0;
  // Called with the prompt once it is rendered, before the context check of the engine request
  // (the server counts dropped reasoning turns, `mmx chat --show-prompt` prints it). May be empty.
  std::function<void(const ChatPrompt&)> on_prompt;
};

struct PreparedTurn {
  ChatPrompt prompt;
  GenRequest request;  // constraint left empty (constraints.h sets it)
  // Choice i's OutputStream: its stop strings and the model's OutputParser (format, the
  // conversation's tools, in reasoning when the prompt opened it, choice i's id seed). Holds
  // copies and the tokenizer pointer of the ServedModel, which must outlive it.
  std::function<OutputStream(int choice)> make_stream;
};

// apply_reasoning_effort, build_chat_prompt, on_prompt, make_gen_request ("messages" is the prompt's
// field), in that order. c is taken by value (move it in: its kwargs get the reasoning switch). Throws ChatError (chat_error.h) for whatever the conversation or the
// options cannot do.
PreparedTurn prepare_turn(const ServedModel& m, Conversation c, const TurnOptions& o);

}  // namespace mmx::chat
