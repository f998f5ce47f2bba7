// thinking / output_config / context_management -> what the chat turn needs (anthropic_controls.h).
#include "server/anthropic_controls.h"

#include "chat/thinking.h"
#include "server/api_error.h"

namespace mmx::server {

namespace {

bool given(const ojson& j, const char* key) { return j.contains(key) && !j.at(key).is_null(); }

// output_config.effort -> the value of the template's switch (thinking_mode: low lets the model
// decide, as reasoning_effort low does; enable_thinking: every Anthropic effort reasons).
ojson effort_switch(const std::string& control, const std::string& effort) {
  if (control == "thinking_mode") return effort == "low" ? "adaptive" : "enabled";
  return true;
}

}  // namespace

ReasoningControls parse_reasoning_controls(const ojson& b, const chat::ServedModel& model, bool count_tokens) {
  ReasoningControls r;
  const std::string control = chat::thinking_control(model);
  std::string effort;
  if (given(b, "output_config")) {
    const ojson& oc = b["output_config"];
    if (!oc.is_object()) bad_request("'output_config' must be an object", "output_config");
    for (const auto& [k, v] : oc.items()) {
      if (v.is_null()) continue;
      if (k == "effort") {
        if (!v.is_string() || !(v == "low" || v == "medium" || v == "high" || v == "xhigh" || v == "max"))
          bad_request("'output_config.effort' must be \"low\", \"medium\", \"high\", \"xhigh\" or \"max\"", "output_config");
        effort = v.get<std::string>();
      } else if (k == "format") {
        if (!v.is_object() || v.value("type", "") != "json_schema" || !v.contains("schema") || !v["schema"].is_object())
          bad_request("'output_config.format' must be {\"type\": \"json_schema\", \"schema\": {...}}", "output_config");
        for (const auto& [fk, fv] : v.items())
          if (fk != "type" && fk != "schema") bad_request("'output_config.format." + fk + "' is not supported", "output_config");
        r.response_format = {{"type", "json_schema"}, {"json_schema", {{"name", "output"}, {"schema", v["schema"]}}}};
      } else {
        bad_request("'output_config." + k + "' is not supported (this server knows 'effort' and 'format')", "output_config");
      }
    }
  }
  std::string type;  // "" when thinking is absent
  if (given(b, "thinking")) {
    const ojson& th = b["thinking"];
    if (!th.is_object() || !th.contains("type") ||
        !(th["type"] == "enabled" || th["type"] == "disabled" || th["type"] == "adaptive"))
      bad_request("'thinking' must be {\"type\": \"enabled\", \"budget_tokens\": N}, {\"type\": \"adaptive\"} or "
                  "{\"type\": \"disabled\"}", "thinking");
    type = th["type"].get<std::string>();
    for (const auto& [k, v] : th.items()) {
      if (k == "type") continue;
      if (k == "budget_tokens" && type == "enabled") {
        if (!v.is_number_integer() || v.get<int64_t>() < 1)
          bad_request("'thinking.budget_tokens' must be a positive integer", "thinking");
        r.thinking_budget = v.get<int64_t>();
      } else if (k == "display" && type != "disabled") {
        if (!v.is_null() && v != "summarized" && v != "omitted")
          bad_request("'thinking.display' must be \"summarized\" or \"omitted\"", "thinking");
        r.omit_thinking = v == "omitted";
      } else {
        bad_request("'thinking." + k + "' is not a field of this thinking setting", "thinking");
      }
    }
    if (type == "enabled" && !count_tokens && !th.contains("budget_tokens"))
      bad_request("'thinking.budget_tokens' is required when thinking is enabled", "thinking");
  }
  // The switch: an explicit enabled / disabled decides; adaptive (or no thinking field) leaves it
  // to output_config.effort when one is given, else adaptive is M3's own "adaptive".
  if (control.empty()) {
    if (type == "disabled")
      bad_request("'thinking' {\"type\": \"disabled\"} is not supported: this model always reasons (its chat template "
                  "has no switch to turn thinking off)", "thinking");
    return r;  // effort, adaptive, enabled: the model reasons as it always does
  }
  ojson value;
  if (type == "enabled" || type == "disabled") {
    const bool on = type == "enabled";
    value = control == "thinking_mode" ? ojson(on ? "enabled" : "disabled") : ojson(on);
  } else if (!effort.empty()) {
    value = effort_switch(control, effort);
  } else if (type == "adaptive") {
    value = control == "thinking_mode" ? ojson("adaptive") : ojson(true);
  }
  if (!value.is_null()) r.template_kwargs = {{control, value}};
  return r;
}

ContextEdits parse_context_management(const ojson& b) {
  ContextEdits e;
  if (!given(b, "context_management")) return e;
  e.given = true;
  const ojson& cm = b["context_management"];
  if (!cm.is_object()) bad_request("'context_management' must be an object {\"edits\": [...]}", "context_management");
  for (const auto& [k, v] : cm.items())
    if (k != "edits") bad_request("'context_management." + k + "' is not supported", "context_management");
  if (!given(cm, "edits")) return e;
  const ojson& edits = cm["edits"];
  if (!edits.is_array()) bad_request("'context_management.edits' must be an array", "context_management");
  bool seen_thinking = false;
  for (size_t i = 0; i < edits.size(); ++i) {
    const ojson& ed = edits[i];
    const std::string w = "context_management.edits[" + std::to_string(i) + "]";
    if (!ed.is_object() || !ed.contains("type") || !ed["type"].is_string())
      bad_request("'" + w + "' must be an object with a 'type'", "context_management");
    const std::string type = ed["type"].get<std::string>();
    if (type != "clear_thinking_20251015")
      bad_request("'" + w + "' has type '" + type + "': this server applies only clear_thinking_20251015 (clearing "
                  "tool results or compacting would need a server-side edit of the conversation it does not make; "
                  "edit the history on the client)", "context_management");
    if (seen_thinking) bad_request("'" + w + "': clear_thinking_20251015 is given twice", "context_management");
    seen_thinking = true;
    e.keep_thinking_turns = 1;  // Anthropic's default keep: the last assistant turn's thinking
    for (const auto& [k, v] : ed.items()) {
      if (k == "type") continue;
      if (k != "keep") bad_request("'" + w + "." + k + "' is not a field of clear_thinking_20251015", "context_management");
      if (v == "all" || (v.is_object() && v.size() == 1 && v.value("type", "") == "all")) {
        e.keep_thinking_turns = -1;
      } else if (v.is_object() && v.value("type", "") == "thinking_turns" && v.contains("value") &&
                 v["value"].is_number_integer() && v["value"].get<int64_t>() >= 0 && v.size() == 2) {
        e.keep_thinking_turns = v["value"].get<int64_t>();
      } else {
        bad_request("'" + w + ".keep' must be \"all\", {\"type\": \"all\"} or {\"type\": \"thinking_turns\", \"value\": N}",
                    "context_management");
      }
    }
  }
  return e;
}

int64_t clear_thinking(ojson& messages, int64_t keep) {
  if (keep < 0) return 0;
  int64_t seen = 0, cleared = 0;
  for (size_t i = messages.size(); i-- > 0;) {
    ojson& m = messages[i];
    if (m["role"] != "assistant" || !m.contains("reasoning_content")) continue;
    if (seen++ < keep) continue;
    m.erase("reasoning_content");
    ++cleared;
  }
  return cleared;
}

}  // namespace mmx::server
