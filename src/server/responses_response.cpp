#include "server/responses_response.h"

namespace mmx::server {

using ojson = nlohmann::ordered_json;

std::string responses_sse(const std::string& type, const ojson& data) {
  return "event: " + type + "\ndata: " + data.dump(-1, ' ', false, ojson::error_handler_t::replace) + "\n\n";
}

std::string ResponseEvents::event(const char* type, ojson data) {
  ojson e = {{"type", type}, {"sequence_number", seq_++}};
  for (auto& [k, v] : data.items()) e[k] = std::move(v);
  return responses_sse(type, e);
}

std::string ResponseEvents::item_id(const char* prefix) const {
  const std::string suffix = s_.id.rfind("resp_", 0) == 0 ? s_.id.substr(5) : s_.id;
  return prefix + suffix + "_" + std::to_string(output_.size());
}

ojson ResponseEvents::response() const {
  ojson r = {{"id", s_.id},
             {"object", "response"},
             {"created_at", s_.created_at},
             {"status", status_},
             {"background", false},
             {"error", error_},
             {"incomplete_details", incomplete_details_},
             {"model", s_.model},
             {"output", output_}};
  for (const auto& [k, v] : s_.fields.items()) r[k] = v;
  r["usage"] = usage_;
  return r;
}

std::string ResponseEvents::start() {
  const ojson r = response();
  std::string out = event("response.created", {{"response", r}});
  out += event("response.in_progress", {{"response", r}});
  return out;
}

std::string ResponseEvents::open(Kind kind, ojson item) {
  std::string out = close("completed");
  open_ = kind;
  text_.clear();
  item["id"] = item_id(kind == Kind::kReasoning ? "rs_" : kind == Kind::kMessage ? "msg_" : "fc_");
  output_.push_back(item);
  const int64_t index = int64_t(output_.size()) - 1;
  out += event("response.output_item.added", {{"output_index", index}, {"item", item}});
  const ojson& id = output_.back()["id"];
  if (kind == Kind::kReasoning && s_.summary)
    out += event("response.reasoning_summary_part.added",
                 {{"item_id", id}, {"output_index", index}, {"summary_index", 0},
                  {"part", {{"type", "summary_text"}, {"text", ""}}}});
  if (kind == Kind::kMessage)
    out += event("response.content_part.added",
                 {{"item_id", id}, {"output_index", index}, {"content_index", 0},
                  {"part", {{"type", "output_text"}, {"annotations", ojson::array()}, {"text", ""}}}});
  return out;
}

std::string ResponseEvents::close(const char* status) {
  if (open_ == Kind::kNone) return "";
  std::string out;
  ojson& item = output_.back();
  const int64_t index = int64_t(output_.size()) - 1;
  const ojson id = item["id"];
  if (open_ == Kind::kReasoning) {
    out += event("response.reasoning_text.done",
                 {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"text", text_}});
    item["content"] = ojson::array({{{"type", "reasoning_text"}, {"text", text_}}});
    if (s_.summary) {
      const ojson part = {{"type", "summary_text"}, {"text", text_}};
      out += event("response.reasoning_summary_text.done",
                   {{"item_id", id}, {"output_index", index}, {"summary_index", 0}, {"text", text_}});
      out += event("response.reasoning_summary_part.done",
                   {{"item_id", id}, {"output_index", index}, {"summary_index", 0}, {"part", part}});
      item["summary"] = ojson::array({part});
    }
    item["status"] = status;
  } else if (open_ == Kind::kMessage) {
    const ojson part = {{"type", "output_text"}, {"annotations", ojson::array()}, {"logprobs", ojson::array()}, {"text", text_}};
    out += event("response.output_text.done", {{"item_id", id},
                                               {"output_index", index},
                                               {"content_index", 0},
                                               {"text", text_},
                                               {"logprobs", ojson::array()}});
    out += event("response.content_part.done", {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", part}});
    item["content"] = ojson::array({part});
    item["status"] = status;
  } else {
    item["arguments"] = text_;
    item["status"] = status;
    out += event("response.function_call_arguments.done",
                 {{"item_id", id}, {"output_index", index}, {"name", item["name"]}, {"arguments", text_}});
  }
  out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
  open_ = Kind::kNone;
  text_.clear();
  return out;
}

std::string ResponseEvents::delta(const chat::ParsedDelta& d) {
  std::string out;
  auto index = [&] { return int64_t(output_.size()) - 1; };
  if (!d.reasoning.empty()) {
    if (open_ != Kind::kReasoning)
      out += open(Kind::kReasoning, {{"type", "reasoning"}, {"summary", ojson::array()}, {"content", ojson::array()},
                                     {"encrypted_content", nullptr}, {"status", "in_progress"}});
    const ojson& id = output_.back()["id"];
    if (s_.summary)
      out += event("response.reasoning_summary_text.delta",
                   {{"item_id", id}, {"output_index", index()}, {"summary_index", 0}, {"delta", d.reasoning}});
    out += event("response.reasoning_text.delta",
                 {{"item_id", id}, {"output_index", index()}, {"content_index", 0}, {"delta", d.reasoning}});
    text_ += d.reasoning;
  }
  if (!d.content.empty()) {
    if (open_ != Kind::kMessage)
      out += open(Kind::kMessage, {{"type", "message"}, {"status", "in_progress"}, {"role", "assistant"},
                                   {"content", ojson::array()}});
    out += event("response.output_text.delta", {{"item_id", output_.back()["id"]},
                                                {"output_index", index()},
                                                {"content_index", 0},
                                                {"delta", d.content},
                                                {"logprobs", ojson::array()}});
    text_ += d.content;
  }
  for (const chat::ToolCallDelta& p : d.tool_call_deltas) {
    if (!p.id.empty()) {  // a call's first piece opens its item
      ojson item = {{"type", "function_call"}, {"status", "in_progress"}, {"arguments", ""}, {"call_id", p.id}};
      if (auto it = s_.namespaced.find(p.name); it != s_.namespaced.end()) {
        item["name"] = it->second.second;
        item["namespace"] = it->second.first;
      } else {
        item["name"] = p.name;
      }
      out += open(Kind::kCall, std::move(item));
      call_ = p.index;
      ++n_calls_;
    }
    if (open_ == Kind::kCall && p.index == call_ && !p.arguments.empty()) {
      out += event("response.function_call_arguments.delta",
                   {{"item_id", output_.back()["id"]}, {"output_index", index()}, {"delta", p.arguments}});
      text_ += p.arguments;
    }
  }
  return out;
}

std::string ResponseEvents::finish(const std::string& finish_reason, const ResponseUsage& u) {
  const bool cut = finish_reason == "length";
  std::string out = close(cut ? "incomplete" : "completed");
  status_ = cut ? "incomplete" : "completed";
  if (cut) incomplete_details_ = {{"reason", "max_output_tokens"}};
  usage_ = {{"input_tokens", u.input},
            {"input_tokens_details", {{"cached_tokens", u.cached}}},
            {"output_tokens", u.output},
            {"output_tokens_details", {{"reasoning_tokens", u.reasoning}}},
            {"total_tokens", u.input + u.output}};
  out += event(cut ? "response.incomplete" : "response.completed", {{"response", response()}});
  return out;
}

std::string ResponseEvents::fail(const ApiError& e) {
  std::string out = close("incomplete");
  status_ = "failed";
  error_ = {{"code", e.code.empty() ? (e.status >= 500 ? "server_error" : e.type) : e.code}, {"message", e.what()}};
  out += event("response.failed", {{"response", response()}});
  return out;
}

}  // namespace mmx::server
