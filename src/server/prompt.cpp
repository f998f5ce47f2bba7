#include "server/prompt.h"

#include <algorithm>

#include "chat/m1_messages.h"
#include "chat/output_parser.h"
#include "server/api_error.h"
#include "template/jinja.h"

namespace mmx::server {

const char* reasoning_open_tag(chat::OutputFormat f) {
  return f == chat::OutputFormat::kM3 ? "<mm:think>" : "<think>";
}

namespace {

// A Text-01 / M1 model whose template is MiniMax's M1 one (content parts, no tool_calls field).
bool reads_m1_messages(const ServedModel& m) {
  if (m.format != chat::OutputFormat::kM1) return false;
  for (const std::string& name : m.chat_template->names())
    if (chat::template_reads_m1_messages(m.chat_template->source(name))) return true;
  return false;
}

std::string render(const ServedModel& m, const ojson& messages, const ChatRequest& req) {
  try {
    m.chat_template->check_kwargs(req.template_kwargs);
  } catch (const mmx::Error& e) {
    throw ApiError(400, e.what(), "chat_template_kwargs");
  }
  // A kwarg no template reads would be silently ignored (enable_thinking on a template that
  // always reasons): refused by name instead.
  if (req.template_kwargs.is_object())
    for (const auto& [k, v] : req.template_kwargs.items())
      if (!m.chat_template->reads(k))
        throw ApiError(400, "chat_template_kwargs." + k + " is not read by this model's chat template, so it would have no effect",
                       "chat_template_kwargs");
  try {
    // The M1 template reads content parts and renders no tool_calls field (chat/m1_messages.h).
    return m.chat_template->render(reads_m1_messages(m) ? chat::to_m1_messages(messages) : messages, req.tools,
                                   /*add_generation_prompt=*/true, req.template_kwargs);
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

// User content is text (hardening issue, finding 8). Each added-token match in a client string
// (and each U+E000, so no client string can forge a placeholder) is replaced, before rendering,
// by the placeholder U+E000 <i> U+E001 for originals[i]; after rendering, placeholders are
// encoded as text and the rest normally. No match anywhere (the usual case): the prompt is
// encoded whole, exactly as before. A template that escapes non-ASCII inside tojson
// (ensure_ascii) would show the placeholder's escape instead — still text, never a special token.
class TextShield {
 public:
  // model_tags: the markers the model writes itself; they stay special in assistant turns only.
  TextShield(const tok::Tokenizer& tk, std::vector<std::string> model_tags) : tk_(tk), model_tags_(std::move(model_tags)) {}

  // Every string in v; the added-token strings in `keep` are left as they are.
  void shield(ojson& v, const std::vector<std::string>& keep = {}) {
    if (v.is_string()) v = shield_string(v.get<std::string>(), keep);
    else if (v.is_array() || v.is_object())
      for (auto& x : v) shield(x, keep);
  }
  void shield_messages(ojson& messages) {
    for (ojson& msg : messages) {
      const bool assistant = msg.contains("role") && msg["role"] == "assistant";
      shield(msg, assistant ? model_tags_ : std::vector<std::string>{});
    }
  }
  std::vector<int32_t> encode(const std::string& text) const {
    if (originals_.empty()) return tk_.encode(text, false);
    std::vector<int32_t> ids;
    size_t from = 0;
    for (size_t at = text.find(kOpen); at != std::string::npos; at = text.find(kOpen, at + 1)) {
      size_t k = at + kOpen.size(), idx = 0;
      const size_t digits = k;
      while (k < text.size() && text[k] >= '0' && text[k] <= '9' && k - digits < 9) idx = idx * 10 + size_t(text[k++] - '0');
      if (k == digits || text.compare(k, kClose.size(), kClose) != 0 || idx >= originals_.size()) continue;
      append(ids, tk_.encode(std::string_view(text).substr(from, at - from), false));
      append(ids, tk_.encode_as_text(originals_[idx]));
      from = k + kClose.size();
      at = from - 1;
    }
    append(ids, tk_.encode(std::string_view(text).substr(from), false));
    return ids;
  }

 private:
  static constexpr std::string_view kOpen = "\xEE\x80\x80", kClose = "\xEE\x80\x81";  // U+E000, U+E001
  static void append(std::vector<int32_t>& a, const std::vector<int32_t>& b) { a.insert(a.end(), b.begin(), b.end()); }

  std::string shield_string(const std::string& s, const std::vector<std::string>& keep) {
    std::vector<std::pair<size_t, size_t>> spans = tk_.added_token_spans(s);
    for (size_t at = s.find(kOpen); at != std::string::npos; at = s.find(kOpen, at + 1)) spans.emplace_back(at, at + kOpen.size());
    if (spans.empty()) return s;
    std::sort(spans.begin(), spans.end());
    std::string out;
    size_t from = 0;
    for (const auto& [b, e] : spans) {
      if (b < from) continue;  // overlaps the previous span
      const std::string piece = s.substr(b, e - b);
      if (std::find(keep.begin(), keep.end(), piece) != keep.end()) continue;
      out.append(s, from, b - from);
      out += std::string(kOpen) + std::to_string(originals_.size()) + std::string(kClose);
      originals_.push_back(piece);
      from = e;
    }
    out.append(s, from, std::string::npos);
    return out;
  }

  const tok::Tokenizer& tk_;
  std::vector<std::string> model_tags_;
  std::vector<std::string> originals_;
};

bool ends_with_tag(const std::string& text, const std::string& tag) {
  size_t e = text.size();
  while (e > 0 && (text[e - 1] == '\n' || text[e - 1] == ' ')) --e;
  return e >= tag.size() && text.compare(e - tag.size(), tag.size(), tag) == 0;
}

}  // namespace

ChatPrompt build_chat_prompt(const ServedModel& m, const ChatRequest& req_in, double drop_over,
                             int64_t context_limit, bool special_in_content) {
  if (!m.chat_template) bad_request("this model has no chat template: use /v1/completions");
  ojson messages = parse_tool_call_arguments(req_in.messages);
  // content: null (an assistant turn with only tool calls) renders as empty, not as "null".
  for (ojson& msg : messages)
    if (msg.contains("content") && msg["content"].is_null()) msg["content"] = "";
  const chat::Tags tags = chat::tags_for(m.format);
  TextShield shield(*m.tokenizer, {tags.think_start, tags.think_end, tags.block_start, tags.block_end});
  ChatRequest shielded;
  const ChatRequest* rq = &req_in;
  if (!special_in_content) {
    shield.shield_messages(messages);
    shielded.tools = req_in.tools;
    shield.shield(shielded.tools);
    shielded.template_kwargs = req_in.template_kwargs;
    shield.shield(shielded.template_kwargs);
    rq = &shielded;
  }
  const ChatRequest& req = *rq;
  const auto encode = [&](const std::string& text) {
    return special_in_content ? m.tokenizer->encode(text, false) : shield.encode(text);
  };
  ChatPrompt p;
  p.text = render(m, messages, req);
  // Too long to fit whatever it encodes to: refused before encoding (unless dropping reasoning
  // may still shorten it).
  if (const int64_t at_least = m.tokenizer->min_tokens(p.text.size()); drop_over == 0 && at_least >= context_limit)
    context_exceeded(context_limit, "at least " + std::to_string(at_least), "messages");
  p.ids = encode(p.text);
  p.n_tokens_before_drop = int64_t(p.ids.size());
  if (drop_over > 0) {
    const double limit = drop_over * double(context_limit);
    for (size_t i = 0; i < messages.size() && double(p.ids.size()) > limit; ++i) {
      if (messages[i]["role"] != "assistant" || !drop_reasoning(messages[i])) continue;
      ++p.dropped_reasoning_turns;
      p.text = render(m, messages, req);
      p.ids = encode(p.text);
    }
  }
  p.starts_in_reasoning = ends_with_tag(p.text, reasoning_open_tag(m.format));
  return p;
}

}  // namespace mmx::server
