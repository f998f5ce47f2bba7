#include "chat/thinking.h"

#include "chat/chat_error.h"

namespace mmx::chat {

std::string thinking_control(const ServedModel& model) {
  if (model.chat_template == nullptr) return "";
  if (model.chat_template->reads("thinking_mode")) return "thinking_mode";
  if (model.chat_template->reads("enable_thinking")) return "enable_thinking";
  return "";
}

void apply_reasoning_effort(Conversation& c, const ServedModel& model) {
  if (c.reasoning_effort.empty()) return;
  const std::string control = thinking_control(model);
  if (control.empty()) return;  // no switch (M2 always reasons): a stated no-op (thinking.h)
  if (c.template_kwargs.is_object() && c.template_kwargs.contains(control))
    invalid("'reasoning_effort' and chat_template_kwargs." + control + " both set the reasoning switch; send one",
            "reasoning_effort");
  const std::string& e = c.reasoning_effort;
  const bool off = e == "none" || e == "minimal";
  if (!c.template_kwargs.is_object()) c.template_kwargs = ojson::object();
  if (control == "thinking_mode") c.template_kwargs[control] = off ? "disabled" : e == "low" ? "adaptive" : "enabled";
  else c.template_kwargs[control] = !off;
}

}  // namespace mmx::chat
