// The MiniMax-M2 chat template (data/chat_templates/minimax_m2.jinja), embedded at build time.
#pragma once

namespace mmx {
extern const char* const kM2ChatTemplate;
}
