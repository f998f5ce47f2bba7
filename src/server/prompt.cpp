#include "server/prompt.h"

#include "server/api_error.h"
#include "template/jinja.h"

namespace mmx::server {

const char* reasoning_open_tag(chat::OutputFormat f) {
  return f == chat::OutputFormat::kM3 ? "<mm:think>" : "<think>";
}

namespace {

std::string render(const ServedModel& m, const ojson& messages, const ChatRequest& req) {
  try {
    m.chat_template->check_kwargs(req.template_kwargs);
  } catch (const mmx::Error& e) {
    throw ApiError(400, e.what(), "chat_template_kwargs");
  }
  try {
    return m.chat_template->render(messages, req.tools, /*add_generation_prompt=*/true, req.template_kwargs);
  } catch (const jinja::TemplateError& e) {
    // raise_exception() in the template is a message for the client; other template failures
    // come from shapes of the conversation the template cannot handle.
    throw ApiError(400, e.is_raised() ? std::string(e.what())
                                      : std::string("the chat template failed on this conversation: ") + e.what(),
                   "messages");
  }
}

// Removes the reasoning of one assistant message; false if it had none.
bool drop_reasoning(ojson& msg) {
  bool dropped = false;
  if (msg.contains("reasoning_content") && msg["reasoning_content"].is_string() &&
      !msg["reasoning_content"].get<std::string>().empty()) {
    msg.erase("reasoning_content");
    dropped = true;
  }
  if (msg.contains("content") && msg["content"].is_string()) {
    std::string c = msg["content"].get<std::string>();
    const size_t end = c.find("</think>");
    if (end != std::string::npos) {
      c.erase(0, end + 8);
      c.erase(0, c.find_first_not_of('\n') == std::string::npos ? c.size() : c.find_first_not_of('\n'));
      msg["content"] = c;
      dropped = true;
    }
  }
  return dropped;
}

bool ends_with_tag(const std::string& text, const std::string& tag) {
  size_t e = text.size();
  while (e > 0 && (text[e - 1] == '\n' || text[e - 1] == ' ')) --e;
  return e >= tag.size() && text.compare(e - tag.size(), tag.size(), tag) == 0;
}

}  // namespace

ChatPrompt build_chat_prompt(const ServedModel& m, const ChatRequest& req, double drop_over,
                             int64_t context_limit) {
  if (!m.chat_template) bad_request("this model has no chat template: use /v1/completions");
  ojson messages = parse_tool_call_arguments(req.messages);
  // content: null (an assistant turn with only tool calls) renders as empty, not as "null".
  for (ojson& msg : messages)
    if (msg.contains("content") && msg["content"].is_null()) msg["content"] = "";
  ChatPrompt p;
  p.text = render(m, messages, req);
  // Too long to fit whatever it encodes to: refused before encoding (unless dropping reasoning
  // may still shorten it).
  if (const int64_t at_least = m.tokenizer->min_tokens(p.text.size()); drop_over == 0 && at_least >= context_limit)
    context_exceeded(context_limit, "at least " + std::to_string(at_least), "messages");
  p.ids = m.tokenizer->encode(p.text, /*add_special_tokens=*/false);
  p.n_tokens_before_drop = int64_t(p.ids.size());
  if (drop_over > 0) {
    const double limit = drop_over * double(context_limit);
    for (size_t i = 0; i < messages.size() && double(p.ids.size()) > limit; ++i) {
      if (messages[i]["role"] != "assistant" || !drop_reasoning(messages[i])) continue;
      ++p.dropped_reasoning_turns;
      p.text = render(m, messages, req);
      p.ids = m.tokenizer->encode(p.text, false);
    }
  }
  p.starts_in_reasoning = ends_with_tag(p.text, reasoning_open_tag(m.format));
  return p;
}

}  // namespace mmx::server
