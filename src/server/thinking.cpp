#include "server/thinking.h"

#include "server/api_error.h"

namespace mmx::server {

std::string thinking_control(const ServedModel& model) {
  if (model.chat_template == nullptr) return "";
  if (model.chat_template->reads("thinking_mode")) return "thinking_mode";
  if (model.chat_template->reads("enable_thinking")) return "enable_thinking";
  return "";
}

void apply_reasoning_effort(ChatRequest& r, const ServedModel& model) {
  if (r.reasoning_effort.empty()) return;
  const std::string control = thinking_control(model);
  if (control.empty())
    throw ApiError(400, "'reasoning_effort' has no effect on this model: its chat template has no reasoning switch "
                        "(MiniMax-M2 always reasons)", "reasoning_effort", "unsupported_field");
  if (r.template_kwargs.is_object() && r.template_kwargs.contains(control))
    throw ApiError(400, "'reasoning_effort' and chat_template_kwargs." + control + " both set the reasoning switch; send one",
                   "reasoning_effort");
  const std::string& e = r.reasoning_effort;
  const bool off = e == "none" || e == "minimal";
  if (!r.template_kwargs.is_object()) r.template_kwargs = ojson::object();
  if (control == "thinking_mode") r.template_kwargs[control] = off ? "disabled" : e == "low" ? "adaptive" : "enabled";
  else r.template_kwargs[control] = !off;
}

}  // namespace mmx::server
