#include "chat/turn.h"

#include <algorithm>

#include "chat/chat_error.h"
#include "chat/thinking.h"

namespace mmx::chat {

GenRequest make_gen_request(const GenLimits& p, std::vector<int32_t> ids, int64_t context, int64_t default_max_tokens,
                            int64_t vocab, const std::vector<int32_t>& eos, const char* prompt_param) {
  const int64_t n_prompt = int64_t(ids.size());
  if (n_prompt >= context) context_exceeded(context, n_prompt, prompt_param);
  GenRequest g;
  g.prompt = std::move(ids);
  g.sampling = p.sampling;
  g.max_tokens = std::min(p.max_tokens.value_or(default_max_tokens > 0 ? default_max_tokens : context),
                          context - n_prompt);
  if (!p.ignore_eos) g.stop_ids = eos;
  g.ignore_eos = p.ignore_eos;
  g.logprobs = p.logprobs;
  g.top_logprobs = p.top_logprobs;
  for (const auto& [id, bias] : p.sampling.logit_bias)
    if (id >= vocab) invalid("'logit_bias' names token id " + std::to_string(id) + ", outside the vocabulary", "logit_bias");
  return g;
}

PreparedTurn prepare_turn(const ServedModel& m, Conversation c, const TurnOptions& o) {
  apply_reasoning_effort(c, m);
  PreparedTurn t;
  t.prompt = build_chat_prompt(m, c, o.drop_reasoning_over, o.context_limit, o.special_in_content);
  if (o.on_prompt) o.on_prompt(t.prompt);
  t.request = make_gen_request(o.gen, t.prompt.ids, o.context_limit, o.default_max_tokens, m.tokenizer->vocab_size(),
                               m.eos_ids, "messages");
  // The parser reads tools as nlohmann::json (unordered).
  const nlohmann::json tools = c.tools.is_null() ? nlohmann::json(nullptr) : nlohmann::json::parse(c.tools.dump());
  const tok::Tokenizer* tok = m.tokenizer;
  const OutputFormat format = m.format;
  const bool in_reasoning = t.prompt.starts_in_reasoning;
  const uint64_t id_seed = o.tool_call_id_seed;
  t.make_stream = [tok, stop = o.stop, format, tools, in_reasoning, id_seed, popts = o.parser,
                   max_calls = o.max_tool_calls](int i) {
    // The one tool-call id rule (turn.h): choice i's ids come from tool_call_id_seed + 7919 i.
    return OutputStream(*tok, stop, OutputParser(format, tools, in_reasoning, id_seed + uint64_t(i) * 7919, popts),
                        max_calls);
  };
  return t;
}

}  // namespace mmx::chat
