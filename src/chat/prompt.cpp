#include "chat/prompt.h"

#include "chat/chat_error.h"
#include "chat/m1_messages.h"
#include "chat/messages.h"
#include "chat/output_parser.h"
#include "chat/text_shield.h"
#include "template/jinja.h"

namespace mmx::chat {

const char* reasoning_open_tag(OutputFormat f) { return f == OutputFormat::kM3 ? "<mm:think>" : "<think>"; }

namespace {

// A Text-01 / M1 model whose template is MiniMax's M1 one (content parts, no tool_calls field).
bool reads_m1_messages(const ServedModel& m) {
  if (m.format != OutputFormat::kM1) return false;
  for (const std::string& name : m.chat_template->names())
    if (template_reads_m1_messages(m.chat_template->source(name))) return true;
  return false;
}

// messages, with c's tools and kwargs (c.messages itself is not read: the caller's copy may differ).
std::string render(const ServedModel& m, const ojson& messages, const Conversation& c) {
  try {
    m.chat_template->check_kwargs(c.template_kwargs);
  } catch (const Error& e) {
    invalid(e.what(), "chat_template_kwargs");
  }
  // A kwarg no template reads would be silently ignored (enable_thinking on a template that
  // always reasons): refused by name instead.
  if (c.template_kwargs.is_object())
    for (const auto& [k, v] : c.template_kwargs.items())
      if (!m.chat_template->reads(k))
        invalid("chat_template_kwargs." + k + " is not read by this model's chat template, so it would have no effect",
                "chat_template_kwargs");
  try {
    // The M1 template reads content parts and renders no tool_calls field (chat/m1_messages.h).
    return m.chat_template->render(reads_m1_messages(m) ? to_m1_messages(messages) : messages, c.tools,
                                   /*add_generation_prompt=*/true, c.template_kwargs);
  } catch (const jinja::TemplateError& e) {
    // raise_exception() in the template is a message for the client; other template failures
    // come from shapes of the conversation the template cannot handle.
    invalid(e.is_raised() ? std::string(e.what()) : std::string("the chat template failed on this conversation: ") + e.what(),
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

ChatPrompt build_chat_prompt(const ServedModel& m, const Conversation& c_in, double drop_over, int64_t context_limit,
                             bool special_in_content) {
  if (!m.chat_template) invalid("this model has no chat template: use /v1/completions");
  ojson messages = normalize_messages(c_in.messages);  // roles and tool-call arguments (messages.h)
  // content: null (an assistant turn with only tool calls) renders as empty, not as "null".
  for (ojson& msg : messages)
    if (msg.contains("content") && msg["content"].is_null()) msg["content"] = "";
  const Tags tags = tags_for(m.format);
  TextShield shield(*m.tokenizer, {tags.think_start, tags.think_end, tags.block_start, tags.block_end});
  Conversation shielded;
  const Conversation* cp = &c_in;
  if (!special_in_content) {
    shield.shield_messages(messages);
    shielded.tools = c_in.tools;
    shield.shield(shielded.tools);
    shielded.template_kwargs = c_in.template_kwargs;
    shield.shield(shielded.template_kwargs);
    cp = &shielded;
  }
  const Conversation& c = *cp;
  const auto encode = [&](const std::string& text) {
    return special_in_content ? m.tokenizer->encode(text, false) : shield.encode(text);
  };
  ChatPrompt p;
  p.text = render(m, messages, c);
  // Too long to fit whatever it encodes to: refused before encoding (unless dropping reasoning
  // may still shorten it).
  if (const int64_t at_least = m.tokenizer->min_tokens(p.text.size()); drop_over == 0 && at_least >= context_limit)
    context_exceeded(context_limit, at_least, "messages", /*at_least=*/true);
  p.ids = encode(p.text);
  p.n_tokens_before_drop = int64_t(p.ids.size());
  if (drop_over > 0) {
    const double limit = drop_over * double(context_limit);
    for (size_t i = 0; i < messages.size() && double(p.ids.size()) > limit; ++i) {
      if (messages[i]["role"] != "assistant" || !drop_reasoning(messages[i])) continue;
      ++p.dropped_reasoning_turns;
      p.text = render(m, messages, c);
      p.ids = encode(p.text);
    }
  }
  p.starts_in_reasoning = ends_with_tag(p.text, reasoning_open_tag(m.format));
  return p;
}

}  // namespace mmx::chat
